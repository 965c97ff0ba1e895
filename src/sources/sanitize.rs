/// Makes a command line safe to print: a process can put anything in its
/// argv, including escape sequences that would rewrite the user's terminal
/// or title bar. Escape sequences are removed whole; other control
/// characters (newlines and tabs included) become spaces so that arguments
/// stay apart.
pub fn sanitize_command(raw: &str) -> String {
    // Every escape sequence starts with a control character (ESC, or a C1
    // control such as CSI), so a line without one is already safe; that is
    // nearly every line, and the escape parser below is not cheap.
    if !raw.chars().any(char::is_control) {
        return raw.trim().to_string();
    }
    // The stripper drops whitespace controls outright, which would glue
    // arguments together; ESC and BEL must stay for it to see where each
    // sequence ends.
    let spaced: String =
        raw.chars().map(|c| if matches!(c, '\t' | '\n' | '\r' | '\x0b' | '\x0c') { ' ' } else { c }).collect();
    let stripped = strip_ansi_escapes::strip_str(spaced);
    stripped.chars().map(|c| if c.is_control() { ' ' } else { c }).collect::<String>().trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::sanitize_command;

    #[test]
    fn escape_sequences_and_controls_go() {
        assert_eq!(sanitize_command("python\ttrain.py\n--lr 3e-4"), "python train.py --lr 3e-4");
        assert_eq!(sanitize_command("evil\x1b[2J\x1b]0;pwned\x07 cmd"), "evil cmd");
        assert_eq!(sanitize_command("bell\x07\x1b[31mred\x1b[0m"), "bellred");
        assert_eq!(sanitize_command("naïve 日本"), "naïve 日本");
        assert_eq!(sanitize_command(" python  train.py "), "python  train.py");
        assert!(!sanitize_command("c1\u{9b}2Jcsi").chars().any(char::is_control), "a C1 control takes the slow path");
    }
}
