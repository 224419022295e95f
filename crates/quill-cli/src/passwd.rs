//! `quill passwd`: add, change or remove a user in the users file that
//! `quill serve --users` authenticates against (SCRAM-SHA-256).

use std::io::{BufRead, IsTerminal};
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use quill_server::auth::{Users, Verifier};

/// `quill passwd`'s arguments (its help is on `Cmd::Passwd`).
#[derive(clap::Args)]
pub struct PasswdArgs {
    /// The users file.
    #[arg(long, value_name = "FILE")]
    users: PathBuf,
    /// The user's name (the `user` a client connects as).
    name: String,
    /// Remove the user instead.
    #[arg(long)]
    delete: bool,
}

/// Run `quill passwd`.
pub fn run(a: PasswdArgs) -> Result<()> {
    let mut users = Users::load_or_empty(&a.users)?;
    if a.delete {
        if !users.remove(&a.name) {
            bail!("no user {:?} in {}", a.name, a.users.display());
        }
        users.save(&a.users)?;
        eprintln!("removed {} from {}", a.name, a.users.display());
        return Ok(());
    }
    let password = read_password(&a.name)?;
    if password.is_empty() {
        bail!("empty password: a user needs one to connect");
    }
    users.set(&a.name, Verifier::from_password(&password))?;
    users.save(&a.users)?;
    eprintln!(
        "set the password of {} in {} ({} user{}); serve with: quill serve --users {}",
        a.name,
        a.users.display(),
        users.len(),
        if users.len() == 1 { "" } else { "s" },
        a.users.display()
    );
    Ok(())
}

fn read_password(name: &str) -> Result<String> {
    if std::io::stdin().is_terminal() {
        let p = rpassword::prompt_password(format!("password for {name}: "))
            .context("reading the password")?;
        let again = rpassword::prompt_password("again: ").context("reading the password again")?;
        if p != again {
            bail!("the passwords differ");
        }
        return Ok(p);
    }
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .context("reading the password from standard input")?;
    Ok(line.trim_end_matches(['\r', '\n']).to_string())
}
