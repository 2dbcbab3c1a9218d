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

pub(super) fn progress_bar(config: &Config, name: &str) -> ProgressBar {
    let target = if config.progress {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    };
    let bar = ProgressBar::with_draw_target(None, target);
    // The same bar without styles when colour is off (NO_COLOR, or output not to a terminal).
    let template = if config.color {
        "{prefix:.bold} {spinner} [{bar:30.cyan/blue}] {pos}/{len} cells {elapsed} {msg}"
    } else {
        "{prefix} {spinner} [{bar:30}] {pos}/{len} cells {elapsed} {msg}"
    };
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_prefix(name.to_string());
    bar.set_message("starting kernel");
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_color_is_honoured_when_set_to_anything_but_empty() {
        assert!(!no_color(&Environment::empty()));
        assert!(no_color(&Environment::empty().with("NO_COLOR", "1")));
        assert!(!no_color(&Environment::empty().with("NO_COLOR", "")));
    }
}
