//! Terminal output shared by the commands: the progress bar.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::Config;

pub(super) fn progress_bar(config: &Config, name: &str) -> ProgressBar {
    let target = if config.progress {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    };
    let bar = ProgressBar::with_draw_target(None, target);
    if let Ok(style) = ProgressStyle::with_template(
        "{prefix:.bold} {spinner} [{bar:30.cyan/blue}] {pos}/{len} cells {elapsed} {msg}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_prefix(name.to_string());
    bar.set_message("starting kernel");
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}
