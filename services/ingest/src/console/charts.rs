//! The overview's small charts, drawn here as inline SVG (docs/console.md, "Pages"): no
//! chart library and no script. They draw in `currentColor`, so they keep the page's text
//! contrast, and tell two series apart by a dash rather than a colour. Each has a text
//! alternative (`role="img"` with a `<title>`), and the numbers are in the page beside it.

use super::html::esc;

/// The width and height of a chart, in CSS pixels.
const W: f64 = 240.0;
const H: f64 = 40.0;

/// Bars for `values` (oldest first), scaled to the largest; `label` says what they are.
pub fn bars(values: &[f64], label: &str) -> String {
    let top = values.iter().copied().fold(0.0, f64::max).max(1.0);
    let step = W / values.len().max(1) as f64;
    let mut out = open(label);
    for (i, v) in values.iter().enumerate() {
        let h = (v / top * (H - 2.0)).max(if *v > 0.0 { 1.0 } else { 0.0 });
        out.push_str(&format!(
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{h:.1}\" fill=\"currentColor\"/>",
            i as f64 * step,
            H - h,
            (step - 1.0).max(1.0),
        ));
    }
    out.push_str(&baseline());
    out.push_str("</svg>");
    out
}

/// One line per series (oldest point first; `None` leaves a gap), on one scale; the first
/// solid, the next dashed.
pub fn lines(series: &[&[Option<f64>]], label: &str) -> String {
    let top = series
        .iter()
        .flat_map(|s| s.iter().flatten())
        .copied()
        .fold(0.0, f64::max)
        .max(1.0);
    let mut out = open(label);
    for (k, points) in series.iter().enumerate() {
        let step = W / (points.len().max(2) - 1) as f64;
        let dash = if k == 0 {
            ""
        } else {
            " stroke-dasharray=\"4 3\""
        };
        // A gap splits the line: one polyline per run of points.
        let mut run = Vec::new();
        for (i, p) in points.iter().enumerate() {
            match p {
                Some(v) => run.push(format!(
                    "{:.1},{:.1}",
                    i as f64 * step,
                    H - 1.0 - v / top * (H - 2.0)
                )),
                None => flush(&mut out, &mut run, dash),
            }
        }
        flush(&mut out, &mut run, dash);
    }
    out.push_str(&baseline());
    out.push_str("</svg>");
    out
}

fn flush(out: &mut String, run: &mut Vec<String>, dash: &str) {
    match run.len() {
        0 => {}
        1 => out.push_str(&format!(
            "<circle cx=\"{}\" cy=\"{}\" r=\"1.5\" fill=\"currentColor\"/>",
            run[0].split(',').next().unwrap_or("0"),
            run[0].split(',').nth(1).unwrap_or("0"),
        )),
        _ => out.push_str(&format!(
            "<polyline points=\"{}\" fill=\"none\" stroke=\"currentColor\" stroke-width=\"1.5\"{dash}/>",
            run.join(" ")
        )),
    }
    run.clear();
}

/// How much of a whole `part` is, as a filled bar (a spend against its cap).
pub fn meter(part: f64, whole: f64, label: &str) -> String {
    let fraction = if whole > 0.0 {
        (part / whole).clamp(0.0, 1.0)
    } else {
        0.0
    };
    format!(
        "{}<rect x=\"0\" y=\"12\" width=\"{W}\" height=\"16\" fill=\"none\" stroke=\"currentColor\"/>\
         <rect x=\"0\" y=\"12\" width=\"{:.1}\" height=\"16\" fill=\"currentColor\"/></svg>",
        open(label),
        fraction * W,
    )
}

fn open(label: &str) -> String {
    format!(
        "<svg class=\"chart\" role=\"img\" width=\"{W}\" height=\"{H}\" viewBox=\"0 0 {W} {H}\" \
         xmlns=\"http://www.w3.org/2000/svg\"><title>{}</title>",
        esc(label)
    )
}

fn baseline() -> String {
    format!(
        "<line x1=\"0\" y1=\"{H}\" x2=\"{W}\" y2=\"{H}\" stroke=\"currentColor\" stroke-width=\"0.5\"/>"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_scale_to_the_largest_and_escape_their_label() {
        let svg = bars(&[0.0, 5.0, 10.0], "runs <per> minute");
        assert!(
            svg.contains("<title>runs &lt;per&gt; minute</title>"),
            "{svg}"
        );
        assert_eq!(svg.matches("<rect").count(), 3);
        assert!(svg.contains(&format!("height=\"{:.1}\"", H - 2.0)), "{svg}");
        assert!(
            svg.contains("height=\"0.0\""),
            "an empty minute draws nothing: {svg}"
        );
    }

    #[test]
    fn a_gap_splits_a_line_and_the_second_series_is_dashed() {
        let svg = lines(
            &[
                &[Some(1.0), Some(2.0), None, Some(3.0), Some(4.0)],
                &[Some(5.0), Some(6.0)],
            ],
            "latency",
        );
        assert_eq!(svg.matches("<polyline").count(), 3, "{svg}");
        assert_eq!(svg.matches("stroke-dasharray").count(), 1, "{svg}");
        let one = lines(&[&[None, Some(2.0), None]], "one point");
        assert!(one.contains("<circle"), "{one}");
    }

    #[test]
    fn a_meter_fills_its_share_and_never_more() {
        assert!(meter(5.0, 10.0, "spend").contains(&format!("width=\"{:.1}\"", W / 2.0)));
        assert!(meter(50.0, 10.0, "spend").contains(&format!("width=\"{:.1}\"", W)));
        assert!(meter(1.0, 0.0, "no cap").contains("width=\"0.0\""));
    }
}
