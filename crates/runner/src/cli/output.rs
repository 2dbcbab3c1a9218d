//! Terminal output shared by the commands: when to colour, and the progress bar.

use std::io::IsTerminal as _;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::Config;
use crate::kernel::Environment;

/// Whether `NO_COLOR` asks for no colour: set to anything but the empty string
/// (<https://no-color.org>).
pub(super) fn no_color(env: &Environment) -> bool {
    env.get("NO_COLOR").is_some_and(|v| !v.is_empty())
}

/// Colour for this process's output: only when both stdout and stderr are terminals (clap writes
/// help to one and errors to the other) and `NO_COLOR` does not say otherwise.
pub(super) fn color_wanted(env: &Environment) -> bool {
    !no_color(env) && std::io::stdout().is_terminal() && std::io::stderr().is_terminal()
}

/// The one progress bar of a command on stderr: a spinner while the kernel starts, then a count
/// of `unit`s (cells of a notebook, points of a sweep) once the total is known. Before, the bar
/// said `0/0 cells` while a kernel started, and a sweep drew a second bar of its own after it.
pub(super) struct Progress {
    bar: ProgressBar,
    color: bool,
    unit: &'static str,
    counting: bool,
}

impl Progress {
    pub(super) fn new(config: &Config, name: &str, unit: &'static str) -> Self {
        let target = if config.progress {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        // Hidden until set up, so no frame is drawn half-made (without its message).
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
        let template = if config.color {
            "{prefix:.bold} {spinner} {msg} {elapsed}"
        } else {
            "{prefix} {spinner} {msg} {elapsed}"
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style);
        }
        bar.set_prefix(name.to_string());
        bar.set_message("starting kernel");
        bar.set_draw_target(target);
        bar.enable_steady_tick(Duration::from_millis(120));
        Self { bar, color: config.color, unit, counting: false }
    }

    /// `done` of `total` units; the first call turns the spinner into the bar.
    pub(super) fn count(&mut self, done: u64, total: u64) {
        // The counts first: a frame drawn in the new style never says `0/0`.
        self.bar.set_length(total);
        self.bar.set_position(done);
        if !self.counting {
            self.counting = true;
            // The same bar without styles when colour is off (NO_COLOR, or not a terminal).
            let template = if self.color {
                format!("{{prefix:.bold}} {{spinner}} [{{bar:30.cyan/blue}}] {{pos}}/{{len}} {} {{elapsed}}", self.unit)
            } else {
                format!("{{prefix}} {{spinner}} [{{bar:30}}] {{pos}}/{{len}} {} {{elapsed}}", self.unit)
            };
            if let Ok(style) = ProgressStyle::with_template(&template) {
                self.bar.set_style(style.progress_chars("=> "));
            }
            self.bar.set_message("");
        }
    }

    /// Take the bar off the terminal.
    pub(super) fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// `n/total points` in the text of a sweep's progress display (`gpushare.progress`, which in a
/// kernel draws one line in a display of its own): the counts that drive the CLI's own bar.
pub(super) fn points_in(text: &str) -> Option<(u64, u64)> {
    let before = &text[..text.rfind(" points")?];
    let count = before.rsplit(' ').next()?;
    let (done, total) = count.split_once('/')?;
    Some((done.parse().ok()?, total.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sweeps_progress_line_gives_its_counts() {
        assert_eq!(points_in("sharebench torch→jax [######......] 3/21 points 4 KiB dlpack"), Some((3, 21)));
        assert_eq!(points_in("sharebench numpy→torch [....] 0/6 points"), Some((0, 6)));
        assert_eq!(points_in("no count here"), None);
        assert_eq!(points_in("x/y points"), None);
    }

    #[test]
    fn no_color_is_honoured_when_set_to_anything_but_empty() {
        assert!(!no_color(&Environment::empty()));
        assert!(no_color(&Environment::empty().with("NO_COLOR", "1")));
        assert!(!no_color(&Environment::empty().with("NO_COLOR", "")));
    }
}
