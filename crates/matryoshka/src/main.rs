//! The `matryoshka` command.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("up") => {
            eprintln!(
                "matryoshka up: not yet — the API server is being built (see ARCHITECTURE.md)"
            );
            std::process::exit(2);
        }
        _ => {
            eprintln!("usage: matryoshka up [--data-dir DIR]");
            std::process::exit(2);
        }
    }
}
