//! What the command line shows while it works: progress bars that stay
//! off when stderr is not a terminal, lines printed above them, and the
//! size arguments (`64K`, `1G`) many commands take.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

/// A progress bar over `total` units on stderr, hidden when stderr is not
/// a terminal (a pipe, a CI log).
pub fn progress(total: u64, unit: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(total);
    let template =
        format!("{{elapsed_precise}} [{{bar:40}}] {{pos}}/{{len}} {unit} (eta {{eta}}) {{msg}}");
    if let Ok(style) = ProgressStyle::with_template(&template) {
        pb.set_style(style.progress_chars("=> "));
    }
    pb
}

/// Print a line above the progress bar (or plainly when it is hidden).
pub fn say(pb: &ProgressBar, line: String) {
    if pb.is_hidden() {
        outln!("{line}");
    } else {
        pb.println(line);
    }
}

/// A per-mille progress bar for benchmarks that run in named stages: a
/// new stage name restarts the bar.
pub struct StageBar {
    /// The bar itself.
    pub pb: ProgressBar,
    current: std::cell::RefCell<String>,
}

impl StageBar {
    /// A bar with no stage yet.
    pub fn new() -> StageBar {
        StageBar {
            pb: progress(1000, "permille"),
            current: std::cell::RefCell::new(String::new()),
        }
    }

    /// Stage `stage` is `f` (0 to 1) done.
    pub fn tick(&self, stage: &str, f: f64) {
        if *self.current.borrow() != stage {
            self.pb.set_position(0);
            self.pb.set_message(stage.to_string());
            *self.current.borrow_mut() = stage.to_string();
        }
        self.pb.set_position((f.clamp(0.0, 1.0) * 1000.0) as u64);
    }
}

impl Default for StageBar {
    fn default() -> Self {
        Self::new()
    }
}

/// A byte size as typed: a number with an optional `K`, `M` or `G` suffix
/// (powers of 1024; `KiB`, `kb` and friends accepted).
pub fn parse_size(s: &str) -> std::result::Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let t = t.trim_end_matches('b').trim_end_matches('i');
    let (num, mult) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 1u64 << 10),
        Some('m') => (&t[..t.len() - 1], 1 << 20),
        Some('g') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    num.trim()
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("{s:?} is not a size (examples: 4096, 64K, 16M, 1G)"))
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_parse_with_suffixes_and_refuse_garbage() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64K"), Ok(64 << 10));
        assert_eq!(parse_size("16MiB"), Ok(16 << 20));
        assert_eq!(parse_size("1g"), Ok(1 << 30));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("").is_err());
        assert!(parse_size("99999999999G").is_err(), "overflow is an error");
    }
}
