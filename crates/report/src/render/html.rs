//! HTML the pages are built of: text escaped, the page with its style, a figure, a table.

use super::charts::ChartError;
use std::fmt::Write;

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:1.5rem auto;max-width:1320px;padding:0 1rem;color:#222}\
table{border-collapse:collapse;font-size:.85rem;margin:1rem 0}th{white-space:normal}details>summary{cursor:pointer;margin:.5rem 0}\
nav ul{columns:3;font-size:.9rem}nav li{break-inside:avoid}.change{border-top:1px solid #ddd;margin-top:1rem}\
td.text{white-space:normal;text-align:left;max-width:40rem}.quiet{color:#555}\
th,td{border:1px solid #ccc;padding:.2rem .4rem;text-align:right}\
td{white-space:nowrap}th:first-child,td:first-child{text-align:left;font-family:monospace;white-space:normal}\
.regressed{color:#b34700;font-weight:bold}.improved{color:#007a5a}.failed{color:#b00020;font-weight:bold}\
.note{background:#eef4fb;border-left:4px solid #0072b2;padding:.5rem 1rem}\
.warning{background:#fdf1e6;border-left:4px solid #d55e00;padding:.5rem 1rem}\
th[colspan]{text-align:center}tr.group th{background:#f2f2f2;text-align:left;font-family:system-ui,sans-serif}\
.informs{color:#8a4b00;font-style:italic}.wide{overflow-x:auto}.cpu{font-weight:normal;font-size:.8rem;color:#555}\
figure{margin:1.5rem 0}figcaption{font-size:.85rem;color:#555}svg{max-width:100%;height:auto}";

/// `text` as HTML text, its control characters shown as escapes (they come from peers,
/// file names and the environment).
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in ipc_matrix_results::printable(text).chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            _ => out.push(ch),
        }
    }
    out
}

pub fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{}</h1>\n{body}\n</body>\n</html>\n",
        escape(title),
        escape(title)
    )
}

/// A plot with its caption, or the reason it could not be drawn.
pub fn figure(svg: Result<String, ChartError>, caption: &str) -> String {
    match svg {
        Ok(svg) => format!(
            "<figure>\n{svg}\n<figcaption>{}</figcaption>\n</figure>",
            escape(caption)
        ),
        Err(why) => format!(
            "<p class=\"note\">Plot not drawn ({}): {}</p>",
            escape(caption),
            escape(&why.to_string())
        ),
    }
}

/// A cell id that may wrap after its `::` when a table needs the room (and only then:
/// the browser breaks at `<wbr>` only where a line would not fit).
pub(crate) fn breakable(id: &str) -> String {
    escape(id).replace("::", "::<wbr>")
}

/// A table of already formatted text; cells are escaped here.
pub fn table(header: &[String], rows: &[Vec<String>]) -> String {
    let mut html = String::from("<table>\n<tr>");
    for h in header {
        let _ = write!(html, "<th>{}</th>", escape(h));
    }
    html.push_str("</tr>\n");
    for row in rows {
        html.push_str("<tr>");
        for (i, cell) in row.iter().enumerate() {
            let text = match i {
                0 => breakable(cell),
                _ => escape(cell),
            };
            let _ = write!(html, "<td>{text}</td>");
        }
        html.push_str("</tr>\n");
    }
    html.push_str("</table>");
    html
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_figure_not_drawn_says_why_in_its_place() {
        assert_eq!(
            figure(
                Err(ChartError::NothingToDraw("no values to draw")),
                "Cells <over> floors"
            ),
            "<p class=\"note\">Plot not drawn (Cells &lt;over&gt; floors): no values to draw</p>"
        );
        assert_eq!(
            figure(Err(ChartError::Draw("a <bad> font".into())), "c"),
            "<p class=\"note\">Plot not drawn (c): a &lt;bad&gt; font</p>"
        );
    }
}
