//! Records how this code was built, so every result says which compiler, target and
//! optimisation level produced its timings.

fn main() {
    let env = |key: &str| std::env::var(key).unwrap_or_else(|_| "unknown".into());
    let rustc = std::process::Command::new(env("RUSTC"))
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=IPC_MATRIX_BUILD_TARGET={}", env("TARGET"));
    println!(
        "cargo:rustc-env=IPC_MATRIX_BUILD_PROFILE={}",
        env("PROFILE")
    );
    println!(
        "cargo:rustc-env=IPC_MATRIX_BUILD_OPT_LEVEL={}",
        env("OPT_LEVEL")
    );
    println!("cargo:rustc-env=IPC_MATRIX_BUILD_RUSTC={rustc}");
    println!("cargo:rerun-if-changed=build.rs");
}
