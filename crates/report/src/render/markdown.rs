//! Markdown the pages share: prose from results, made safe for GitHub's renderer.

/// Prose from results (a peer's stderr may hold anything): angle brackets would be taken
/// for HTML by GitHub's renderer and vanish, and control characters would reach the
/// terminal of whoever reads the file there.
pub(crate) fn text(prose: &str) -> String {
    ipc_matrix_results::printable(prose)
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
