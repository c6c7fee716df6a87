use std::process::ExitCode;

fn main() -> ExitCode {
    minicoder::cli::main()
}
