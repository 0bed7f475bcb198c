//! How an error is told: its message and each cause once.

/// `e` and its causes, `message: cause: cause`, each said once: a cause whose words are
/// already in what was said (an error that writes its source into its own message, as
/// `"{context}: {source}"` does) is not said again.
pub fn error_text(e: &anyhow::Error) -> String {
    let mut text = e.to_string();
    for cause in e.chain().skip(1) {
        let words = cause.to_string();
        if !text.contains(&words) {
            text.push_str(": ");
            text.push_str(&words);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("reading {path}: {source}")]
    struct Says {
        path: &'static str,
        source: std::io::Error,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("reading {path}")]
    struct Wraps {
        path: &'static str,
        source: std::io::Error,
    }

    fn gone() -> std::io::Error {
        std::io::Error::from(std::io::ErrorKind::NotFound)
    }

    #[test]
    fn a_cause_is_said_once_whether_or_not_its_error_says_it() {
        let says = anyhow::Error::new(Says {
            path: "a.json",
            source: gone(),
        });
        assert_eq!(error_text(&says), "reading a.json: entity not found");
        let wraps = anyhow::Error::new(Wraps {
            path: "a.json",
            source: gone(),
        });
        assert_eq!(error_text(&wraps), "reading a.json: entity not found");
        let context = anyhow::Error::new(gone()).context("loading the baseline");
        assert_eq!(
            error_text(&context),
            "loading the baseline: entity not found"
        );
        let both = anyhow::Error::new(Says {
            path: "a.json",
            source: gone(),
        })
        .context("loading the baseline");
        assert_eq!(
            error_text(&both),
            "loading the baseline: reading a.json: entity not found"
        );
    }
}
