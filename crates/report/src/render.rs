//! What several pages are drawn with, and no page's own content: HTML (escaping, the page
//! and its style, figures, tables), Markdown (prose made safe for GitHub's renderer) and
//! charts (the SVG canvas, palette and log axes, and the charts of plain rows and values).
//! Nothing here imports a page.

pub(crate) mod charts;
pub(crate) mod html;
pub(crate) mod markdown;
