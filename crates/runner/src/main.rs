//! The `gpushare` command for development and CI (`cargo run -p gpushare-runner`).
//! The wheel ships the same logic as the `gpushare` console script through `gpushare._native.cli_main`.
fn main() {
    let args: Vec<String> = std::env::args().collect();
    std::process::exit(gpushare_runner::cli::run(args));
}
