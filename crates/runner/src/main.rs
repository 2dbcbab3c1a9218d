//! The `gpushare` command for development and CI (`cargo run -p gpushare-runner`).
//! The wheel ships the same logic as the `gpushare` console script through `gpushare._native.cli_main`.
fn main() {
    // args_os: `std::env::args` panics on an argument that is not UTF-8 (a file name may be any
    // bytes); the command says what it cannot read instead.
    std::process::exit(gpushare_runner::cli::run(std::env::args_os()));
}
