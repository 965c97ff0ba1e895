fn main() -> std::process::ExitCode {
    gpuscope::app::main()
}
