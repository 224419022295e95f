//! PNG charts of throughput against client count, drawn with `plotters`.
//!
//! A chart is a grid of small panels (up to four per row), one per workload
//! step or shape, under one title. In every panel the x axis is the client
//! (or thread) count on a log2 axis with a tick at each count measured, the
//! y axis is throughput from zero, and each engine is one line with a dot at
//! each measurement. An engine keeps its colour in every panel, so panels
//! can be compared at a glance.
//!
//! Text is drawn with DejaVu Sans, read at run time from
//! [`FONT_PATH`] (Debian package `fonts-dejavu-core`); no font is built in.

use std::path::Path;
use std::sync::Mutex;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::{FontStyle, RGBColor, register_font};

use quill::{Error, Result};

/// The font every chart's text is drawn with.
pub const FONT_PATH: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

/// The family name the font is registered under with `plotters`.
const FAMILY: &str = "sans-serif";

/// Width of one panel, pixels.
const PANEL_W: u32 = 520;
/// Height of one panel, pixels.
const PANEL_H: u32 = 380;
/// Height of the band holding the chart's title.
const TITLE_H: u32 = 56;
/// Most panels in one row.
const PER_ROW: usize = 4;

/// Line colours, in the order series names first appear (Tableau 10).
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// One line: an engine's throughput at each x (client count).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Series {
    /// The engine (or configuration) the line belongs to; shown in the
    /// legend, and the key its colour is chosen by.
    pub name: String,
    /// `(clients, throughput)` pairs, in any order. Clients must be positive
    /// and throughput finite and not negative.
    pub points: Vec<(f64, f64)>,
}

/// One small chart: a title (e.g. the workload step) and its lines.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Panel {
    /// Shown above the panel.
    pub title: String,
    /// The lines drawn in the panel.
    pub series: Vec<Series>,
}

/// Draw `panels` in a grid (up to 4 per row) into a PNG at `path`:
/// x = client/thread count on a log2 axis (ticks at the x values present),
/// y = throughput from 0 with `y_label`, one colour per series name (the same
/// name gets the same colour in every panel), a legend in each panel,
/// a title at the top.
///
/// Fails with [`Error::InvalidArgument`] (`what` = `"chart"`) when `panels`
/// is empty, a point cannot be placed (x not positive, y negative or not
/// finite), the font at [`FONT_PATH`] cannot be loaded, or drawing or
/// writing the file fails.
pub fn render(path: &Path, title: &str, y_label: &str, panels: &[Panel]) -> Result<()> {
    if panels.is_empty() {
        return Err(invalid(format!(
            "no panels to draw into {}",
            path.display()
        )));
    }
    for panel in panels {
        check_points(panel)?;
    }
    register_dejavu()?;

    let names = series_names(panels);
    let cols = panels.len().min(PER_ROW);
    let rows = panels.len().div_ceil(PER_ROW);
    let width = PANEL_W * u32::try_from(cols).map_err(invalid)?;
    let height = u32::try_from(rows)
        .ok()
        .and_then(|r| r.checked_mul(PANEL_H)?.checked_add(TITLE_H))
        .ok_or_else(|| invalid(format!("{} panels make too tall an image", panels.len())))?;
    let drawing = |e: &dyn std::fmt::Display| invalid(format!("drawing {}: {e}", path.display()));

    let root = BitMapBackend::new(path, (width, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| drawing(&e))?;
    let (top, body) = root.split_vertically(TITLE_H);
    top.draw(&Text::new(
        title.to_string(),
        (i32::try_from(width / 2).map_err(invalid)?, 14),
        TextStyle::from((FAMILY, 30).into_font())
            .color(&BLACK)
            .pos(Pos::new(HPos::Center, VPos::Top)),
    ))
    .map_err(|e| drawing(&e))?;

    for (area, panel) in body.split_evenly((rows, cols)).iter().zip(panels) {
        draw_panel(area, panel, y_label, &names).map_err(|e| drawing(&e))?;
    }
    root.present().map_err(|e| drawing(&e))?;
    Ok(())
}

/// Draw one panel into `area`.
fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    panel: &Panel,
    y_label: &str,
    names: &[&str],
) -> std::result::Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    // Every client count measured in the panel gets a tick.
    let mut ticks: Vec<f64> = panel
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|&(x, _)| x))
        .collect();
    ticks.sort_by(f64::total_cmp);
    ticks.dedup_by(|a, b| (*a - *b).abs() <= 1e-9 * b.abs());
    let x_axis = Log2Axis::new(ticks);

    let y_max = panel
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|&(_, y)| y))
        .fold(0.0_f64, f64::max);
    // Head room above the highest line for the legend (about 20 px a line
    // in a plot about 280 px tall), so the legend never hides a line.
    let legend = (panel.series.len() as f64 * 20.0 + 24.0) / 280.0;
    let y_top = if y_max > 0.0 {
        y_max / (1.0 - legend.min(0.6)) * 1.02
    } else {
        1.0
    };

    let mut chart = ChartBuilder::on(area)
        .caption(panel.title.as_str(), (FAMILY, 22))
        .margin(10)
        .margin_right(18)
        .x_label_area_size(44)
        .y_label_area_size(62)
        .build_cartesian_2d(x_axis, 0.0..y_top)?;

    chart
        .configure_mesh()
        .light_line_style(WHITE)
        .bold_line_style(BLACK.mix(0.12))
        .x_desc("clients (log2 axis)")
        .y_desc(y_label)
        .x_label_formatter(&|v| count_label(*v))
        .y_label_formatter(&|v| si_label(*v))
        .y_labels(6)
        .label_style((FAMILY, 15))
        .axis_desc_style((FAMILY, 16))
        .draw()?;

    for series in &panel.series {
        let colour = colour_of(names, &series.name);
        let mut points = series.points.clone();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        chart
            .draw_series(LineSeries::new(points, colour.stroke_width(2)).point_size(3))?
            .label(series.name.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 22, y)], colour.stroke_width(3))
            });
    }

    if !panel.series.is_empty() {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.4))
            .label_font((FAMILY, 15))
            .draw()?;
    }
    Ok(())
}

/// The x axis: client counts placed by their log2, with a tick at each
/// count measured and nowhere else.
struct Log2Axis {
    /// log2 of the axis's left end.
    lo: f64,
    /// log2 of the axis's right end.
    hi: f64,
    /// The counts to tick, ascending.
    ticks: Vec<f64>,
}

impl Log2Axis {
    /// An axis spanning `ticks` (positive, ascending), with room either side
    /// so the outermost dots and tick labels are not clipped.
    fn new(ticks: Vec<f64>) -> Log2Axis {
        let (lo, hi) = match (ticks.first(), ticks.last()) {
            (Some(lo), Some(hi)) => (lo.log2(), hi.log2()),
            _ => (0.0, 1.0),
        };
        let pad = ((hi - lo) * 0.06).max(0.25);
        Log2Axis {
            lo: lo - pad,
            hi: hi + pad,
            ticks,
        }
    }
}

impl Ranged for Log2Axis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let t = (value.log2() - self.lo) / (self.hi - self.lo);
        let span = f64::from(limit.1) - f64::from(limit.0);
        // A saturating float-to-int cast: pixel positions always fit.
        (f64::from(limit.0) + span * t).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        // Bold grid lines and labels at the counts measured; no light lines.
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.lo.exp2()..self.hi.exp2()
    }
}

/// Reject points a log2 axis from zero cannot place.
fn check_points(panel: &Panel) -> Result<()> {
    for series in &panel.series {
        for &(x, y) in &series.points {
            if !(x.is_finite() && x > 0.0) {
                return Err(invalid(format!(
                    "panel {:?}, series {:?}: client count {x} is not positive, \
                     so it has no place on a log2 axis",
                    panel.title, series.name
                )));
            }
            if !(y.is_finite() && y >= 0.0) {
                return Err(invalid(format!(
                    "panel {:?}, series {:?}: throughput {y} at {x} clients \
                     is negative or not finite",
                    panel.title, series.name
                )));
            }
        }
    }
    Ok(())
}

/// Every series name, in the order first met across all panels: the index
/// of a name here is its colour.
fn series_names(panels: &[Panel]) -> Vec<&str> {
    let mut names: Vec<&str> = Vec::new();
    for series in panels.iter().flat_map(|p| &p.series) {
        if !names.contains(&series.name.as_str()) {
            names.push(&series.name);
        }
    }
    names
}

/// The colour of the series called `name`.
fn colour_of(names: &[&str], name: &str) -> RGBColor {
    let i = names.iter().position(|n| *n == name).unwrap_or(0);
    PALETTE.get(i % PALETTE.len()).copied().unwrap_or(BLACK)
}

/// A client count as a tick label: whole numbers as such.
fn count_label(x: f64) -> String {
    if (x - x.round()).abs() < 1e-6 {
        format!("{}", x.round())
    } else {
        format!("{x:.1}")
    }
}

/// `v` with an SI suffix: 0, 950, 12k, 1.5k, 2.25M.
fn si_label(v: f64) -> String {
    let (scaled, suffix) = match v.abs() {
        a if a >= 1e9 => (v / 1e9, "G"),
        a if a >= 1e6 => (v / 1e6, "M"),
        a if a >= 1e3 => (v / 1e3, "k"),
        _ => (v, ""),
    };
    let text = format!("{scaled:.2}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text}{suffix}")
}

/// Whether [`FONT_PATH`] has been registered with `plotters`.
static REGISTERED: Mutex<bool> = Mutex::new(false);

/// Register [`FONT_PATH`] as the `sans-serif` family, once per process.
///
/// `plotters` keeps registered fonts for the life of the process and wants
/// the bytes for as long, so they are leaked: about 750 KB, once.
fn register_dejavu() -> Result<()> {
    let mut done = REGISTERED.lock().unwrap_or_else(|e| e.into_inner());
    if *done {
        return Ok(());
    }
    let bytes = std::fs::read(FONT_PATH).map_err(|e| {
        invalid(format!(
            "cannot read the chart font {FONT_PATH} ({e}); \
             install it with `apt-get install fonts-dejavu-core`"
        ))
    })?;
    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    register_font(FAMILY, FontStyle::Normal, bytes).map_err(|_| {
        invalid(format!(
            "{FONT_PATH} is not a TrueType font plotters can use; \
             reinstall it with `apt-get install --reinstall fonts-dejavu-core`"
        ))
    })?;
    *done = true;
    Ok(())
}

/// The error for anything that keeps a chart from being drawn.
fn invalid(reason: impl std::fmt::Display) -> Error {
    Error::InvalidArgument {
        what: "chart",
        reason: reason.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(name: &str, scale: f64) -> Series {
        Series {
            name: name.to_string(),
            points: [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]
                .iter()
                .map(|&x: &f64| (x, scale * x.sqrt() * 1000.0))
                .collect(),
        }
    }

    fn sample_panels() -> Vec<Panel> {
        vec![
            Panel {
                title: "point select".to_string(),
                series: vec![
                    series("quill", 30.0),
                    series("sqlite", 12.0),
                    series("rocksdb", 21.0),
                ],
            },
            Panel {
                title: "read write".to_string(),
                // Another order: colours follow names, not positions.
                series: vec![
                    series("rocksdb", 4.0),
                    series("quill", 6.5),
                    series("sqlite", 1.2),
                ],
            },
        ]
    }

    #[test]
    fn renders_a_png() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("chart.png");
        render(
            &path,
            "OLTP throughput, 2 workloads",
            "transactions / s",
            &sample_panels(),
        )
        .unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert!(bytes.starts_with(&[0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a]));
        assert!(bytes.len() > 8 * 1024, "only {} bytes", bytes.len());
        // To look at the result: QUILL_CHART_SAMPLE=/tmp/chart-sample.png
        if let Ok(copy) = std::env::var("QUILL_CHART_SAMPLE") {
            std::fs::copy(&path, copy).unwrap();
        }
    }

    #[test]
    fn no_panels_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = render(&dir.path().join("x.png"), "t", "y", &[]).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { what: "chart", .. }));
    }

    #[test]
    fn one_point_series_renders() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("one.png");
        let panels = [Panel {
            title: "single".to_string(),
            series: vec![Series {
                name: "quill".to_string(),
                points: vec![(8.0, 1234.0)],
            }],
        }];
        render(&path, "one point", "ops / s", &panels).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert!(bytes.starts_with(b"\x89PNG"));
    }

    #[test]
    fn bad_points_and_paths_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let panel = |x: f64, y: f64| Panel {
            title: "p".to_string(),
            series: vec![Series {
                name: "s".to_string(),
                points: vec![(x, y)],
            }],
        };
        for (x, y) in [(0.0, 1.0), (-2.0, 1.0), (2.0, -1.0), (2.0, f64::NAN)] {
            let err = render(&dir.path().join("b.png"), "t", "y", &[panel(x, y)]).unwrap_err();
            assert!(matches!(err, Error::InvalidArgument { what: "chart", .. }));
        }
        let missing = dir.path().join("no such dir").join("c.png");
        let err = render(&missing, "t", "y", &[panel(1.0, 1.0)]).unwrap_err();
        let Error::InvalidArgument {
            what: "chart",
            reason,
        } = err
        else {
            panic!("{err:?}");
        };
        // The reason carries the underlying I/O error.
        assert!(reason.contains("No such file"), "{reason}");
    }

    #[test]
    fn labels() {
        assert_eq!(count_label(8.0), "8");
        assert_eq!(count_label(1.0), "1");
        assert_eq!(count_label(3f64.log2().exp2()), "3");
        assert_eq!(count_label(1.5), "1.5");
        assert_eq!(si_label(0.0), "0");
        assert_eq!(si_label(950.0), "950");
        assert_eq!(si_label(12_000.0), "12k");
        assert_eq!(si_label(1_500.0), "1.5k");
        assert_eq!(si_label(2_250_000.0), "2.25M");
    }

    #[test]
    fn colours_follow_names() {
        let panels = sample_panels();
        let names = series_names(&panels);
        assert_eq!(names, ["quill", "sqlite", "rocksdb"]);
        assert_ne!(colour_of(&names, "quill"), colour_of(&names, "sqlite"));
    }
}
