//! The binary only turns the command line into a call into the library.

fn main() -> std::process::ExitCode {
    mimeref_milter::main()
}
