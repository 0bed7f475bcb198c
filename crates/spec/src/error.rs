//! Errors that point into matrix.yaml: file, line:column, the path into the document, and
//! what would have been accepted.

use std::{fmt, path::PathBuf};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    pub file: PathBuf,
    /// 1-based line and column of the offending node, when known.
    pub location: Option<(usize, usize)>,
    /// Path into the document, like `scenarios[2].payloads[1]`; empty for the whole file.
    pub path: String,
    pub message: String,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some((line, column)) = self.location {
            write!(f, ":{line}:{column}")?;
        }
        if !self.path.is_empty() {
            write!(f, ": {}", self.path)?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Every problem found in one document, in document order, one per line. Like
/// [`SpecError`], it carries no `error:` prefix: whoever prints it adds one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecErrors(pub Vec<SpecError>);

impl fmt::Display for SpecErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for SpecErrors {}
