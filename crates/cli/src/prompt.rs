//! Questions for the user: interactive on a terminal, one line each from stdin otherwise (so
//! scripts and tests can answer).

use std::io::{BufRead, IsTerminal, Write};

use anyhow::Context;

fn read_line() -> anyhow::Result<String> {
    let mut line = String::new();
    let n = std::io::stdin().lock().read_line(&mut line)?;
    anyhow::ensure!(n > 0, "no answer on standard input");
    Ok(line.trim_end_matches(['\r', '\n']).to_string())
}

pub fn text(question: &str, default: Option<&str>) -> anyhow::Result<String> {
    if std::io::stdin().is_terminal() {
        let mut input = dialoguer::Input::<String>::new().with_prompt(question);
        if let Some(default) = default {
            input = input.default(default.to_string());
        }
        return input.interact_text().context("reading answer");
    }
    eprint!("{question}: ");
    std::io::stderr().flush()?;
    let answer = read_line()?;
    Ok(if answer.is_empty() {
        default.unwrap_or_default().to_string()
    } else {
        answer
    })
}

pub fn password(question: &str, confirm: bool) -> anyhow::Result<String> {
    if std::io::stdin().is_terminal() {
        let mut input = dialoguer::Password::new().with_prompt(question);
        if confirm {
            input = input.with_confirmation("Confirm password", "Passwords do not match.");
        }
        return input.interact().context("reading password");
    }
    eprint!("{question}: ");
    std::io::stderr().flush()?;
    read_line()
}

pub fn confirm(question: &str) -> anyhow::Result<bool> {
    let answer = text(&format!("{question} (yes/no)"), None)?;
    Ok(matches!(answer.trim().to_lowercase().as_str(), "y" | "yes"))
}
