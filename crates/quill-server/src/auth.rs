//! Password authentication: SCRAM-SHA-256 (RFC 5802/7677, as PostgreSQL
//! 10+ and every current driver speak it) against a users file.
//!
//! The users file holds one user per line, `name:verifier`, where the
//! verifier is PostgreSQL's own `rolpassword` form:
//! `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>` (base64).
//! The server never holds a password, only what SCRAM needs to check a
//! proof and to prove itself to the client; a verifier copied out of
//! PostgreSQL's `pg_authid` works here, and one made here works there.
//! Blank lines and lines starting with `#` are ignored.
//!
//! A user not in the file goes through the same exchange against a
//! random verifier and fails at the same step with the same message as
//! a wrong password, so the server does not tell which names exist.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use pgwire::api::auth::sasl::scram::{SCRAM_ITERATIONS, ScramSecret, gen_salted_password};

/// The prefix of a SCRAM-SHA-256 verifier.
const SCHEME: &str = "SCRAM-SHA-256";

/// A users file that cannot be read or understood.
#[derive(Debug, thiserror::Error)]
pub enum UsersError {
    /// Reading or writing the file failed (what the system said is the
    /// error's source, so a report prints it once).
    #[error("users file {path}")]
    Io {
        /// The users file.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// A line is not `name:SCRAM-SHA-256$iterations:salt$StoredKey:ServerKey`.
    #[error("{path} line {line}: {reason}")]
    Malformed {
        /// The users file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// A user name that cannot be stored (empty, or with `:` or a line
    /// break in it).
    #[error("invalid user name {0:?}: it must be non-empty, without ':' or line breaks")]
    BadName(String),
}

/// What SCRAM needs to check one user's proof.
#[derive(Clone, PartialEq, Eq)]
pub struct Verifier {
    salt: Vec<u8>,
    iterations: u32,
    stored_key: Vec<u8>,
    server_key: Vec<u8>,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Keys stay out of logs: they are as good as the password to
        // anyone impersonating the server.
        f.debug_struct("Verifier")
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

impl Verifier {
    /// The verifier of `password` with a fresh random salt and
    /// PostgreSQL's default 4096 iterations.
    pub fn from_password(password: &str) -> Verifier {
        let salt: [u8; 16] = rand::random();
        let iterations = SCRAM_ITERATIONS;
        let salted = gen_salted_password(password, &salt, iterations);
        match ScramSecret::verifier_from_salted_password(salt.to_vec(), salted, iterations) {
            ScramSecret::Verifier {
                salt,
                stored_key,
                server_key,
                ..
            } => Verifier {
                salt,
                iterations: iterations as u32,
                stored_key,
                server_key,
            },
            ScramSecret::SaltedPassword { .. } => {
                unreachable!("verifier_from_salted_password returns a verifier")
            }
        }
    }

    /// A verifier no password matches, for a user that does not exist.
    pub(crate) fn impossible() -> Verifier {
        Verifier {
            salt: rand::random::<[u8; 16]>().to_vec(),
            iterations: SCRAM_ITERATIONS as u32,
            stored_key: rand::random::<[u8; 32]>().to_vec(),
            server_key: rand::random::<[u8; 32]>().to_vec(),
        }
    }

    /// Parse PostgreSQL's form,
    /// `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`.
    pub fn parse(s: &str) -> Result<Verifier, String> {
        let rest = s
            .strip_prefix(SCHEME)
            .and_then(|r| r.strip_prefix('$'))
            .ok_or_else(|| format!("the verifier does not start with {SCHEME}$"))?;
        let (params, keys) = rest
            .split_once('$')
            .ok_or("expected <iterations>:<salt>$<StoredKey>:<ServerKey>")?;
        let (iterations, salt) = params
            .split_once(':')
            .ok_or("expected <iterations>:<salt> before the '$'")?;
        let (stored, server) = keys
            .split_once(':')
            .ok_or("expected <StoredKey>:<ServerKey> after the '$'")?;
        let iterations: u32 = iterations
            .parse()
            .ok()
            .filter(|&n| n >= 1)
            .ok_or_else(|| format!("iterations {iterations:?} is not a positive number"))?;
        let b64 = |what: &str, v: &str| {
            STANDARD
                .decode(v)
                .map_err(|e| format!("{what} is not base64: {e}"))
        };
        let salt = b64("the salt", salt)?;
        let stored_key = b64("StoredKey", stored)?;
        let server_key = b64("ServerKey", server)?;
        if salt.is_empty() {
            return Err("the salt is empty".into());
        }
        for (what, k) in [("StoredKey", &stored_key), ("ServerKey", &server_key)] {
            if k.len() != 32 {
                return Err(format!("{what} is {} bytes, not 32 (SHA-256)", k.len()));
            }
        }
        Ok(Verifier {
            salt,
            iterations,
            stored_key,
            server_key,
        })
    }

    /// The SCRAM secret pgwire's exchange checks proofs against.
    pub(crate) fn secret(&self) -> ScramSecret {
        ScramSecret::Verifier {
            salt: self.salt.clone(),
            iterations: self.iterations as usize,
            stored_key: self.stored_key.clone(),
            server_key: self.server_key.clone(),
        }
    }
}

impl std::fmt::Display for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{SCHEME}${}:{}${}:{}",
            self.iterations,
            STANDARD.encode(&self.salt),
            STANDARD.encode(&self.stored_key),
            STANDARD.encode(&self.server_key)
        )
    }
}

/// The users a server admits, by name.
#[derive(Clone, Debug, Default)]
pub struct Users {
    users: BTreeMap<String, Verifier>,
}

impl Users {
    /// Read a users file.
    pub fn load(path: &Path) -> Result<Users, UsersError> {
        let text = std::fs::read_to_string(path).map_err(|source| UsersError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Users::parse(&text).map_err(|(line, reason)| UsersError::Malformed {
            path: path.to_path_buf(),
            line,
            reason,
        })
    }

    /// Read a users file, or no users if it does not exist yet.
    pub fn load_or_empty(path: &Path) -> Result<Users, UsersError> {
        match Users::load(path) {
            Err(UsersError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                Ok(Users::default())
            }
            r => r,
        }
    }

    /// Parse a users file's text; an error names the 1-based line.
    pub fn parse(text: &str) -> Result<Users, (usize, String)> {
        let mut users = BTreeMap::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (name, verifier) = line
                .split_once(':')
                .ok_or((i + 1, "expected name:verifier".to_string()))?;
            if name.is_empty() {
                return Err((i + 1, "the user name is empty".into()));
            }
            let v = Verifier::parse(verifier).map_err(|e| (i + 1, e))?;
            if users.insert(name.to_string(), v).is_some() {
                return Err((i + 1, format!("user {name:?} appears twice")));
            }
        }
        Ok(Users { users })
    }

    /// The verifier of `name`, if the user exists.
    pub fn get(&self, name: &str) -> Option<&Verifier> {
        self.users.get(name)
    }

    /// Add `name`, or replace its verifier.
    pub fn set(&mut self, name: &str, verifier: Verifier) -> Result<(), UsersError> {
        if name.is_empty() || name.contains([':', '\n', '\r']) {
            return Err(UsersError::BadName(name.to_string()));
        }
        self.users.insert(name.to_string(), verifier);
        Ok(())
    }

    /// Remove `name`; whether it was there.
    pub fn remove(&mut self, name: &str) -> bool {
        self.users.remove(name).is_some()
    }

    /// How many users there are.
    pub fn len(&self) -> usize {
        self.users.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }

    /// Write the file: to a temporary file beside it (readable by its
    /// owner only), synced, then renamed over it, so a crash leaves the
    /// old file or the new one.
    pub fn save(&self, path: &Path) -> Result<(), UsersError> {
        let io = |source| UsersError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut text = String::from(
            "# quill serve users: name:SCRAM-SHA-256$iterations:salt$StoredKey:ServerKey\n\
             # (PostgreSQL's verifier form; manage with `quill passwd`)\n",
        );
        for (name, v) in &self.users {
            text.push_str(&format!("{name}:{v}\n"));
        }
        let tmp = path.with_extension("tmp");
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
        let mut f = opts.open(&tmp).map_err(io)?;
        f.write_all(text.as_bytes()).map_err(io)?;
        f.sync_all().map_err(io)?;
        drop(f);
        std::fs::rename(&tmp, path).map_err(io)?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            // The rename is durable once the directory is synced.
            if let Ok(d) = std::fs::File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verifier_round_trips_through_text() {
        let v = Verifier::from_password("secret");
        let text = v.to_string();
        assert!(text.starts_with("SCRAM-SHA-256$4096:"), "{text}");
        assert_eq!(Verifier::parse(&text).unwrap(), v);
        assert!(!format!("{v:?}").contains(&STANDARD.encode(&v.stored_key)));
    }

    #[test]
    fn postgres_layout_parses() {
        // PostgreSQL's `pg_authid.rolpassword` layout: 16-byte salt,
        // 32-byte keys, base64 with padding.
        let pg = "SCRAM-SHA-256$4096:fY/Sj+qS26MG8vpCdmJ0gQ==$Vz1CV5Km4y7Ht1u6p4qNAQ6sfhbbrKQtcEwG4AAiuII=:VOLwzKeZTUqf/aAKcXQXyhxqzLwsyRvoVGLxl5v6NRs=";
        let v = Verifier::parse(pg).unwrap();
        assert_eq!(v.iterations, 4096);
        assert_eq!(v.to_string(), pg);
    }

    #[test]
    fn garbage_is_refused_with_the_line() {
        for bad in [
            "alice",
            ":SCRAM-SHA-256$4096:c2FsdA==$AAAA:AAAA",
            "alice:md5abc",
            "alice:SCRAM-SHA-256$x:c2FsdA==$AAAA:AAAA",
            "alice:SCRAM-SHA-256$4096:c2FsdA==$AAAA:AAAA",
            "alice:SCRAM-SHA-256$4096:!!$AAAA:AAAA",
            "alice:SCRAM-SHA-256$4096",
        ] {
            let text = format!("# comment\n\n{bad}\n");
            let (line, _) = Users::parse(&text).unwrap_err();
            assert_eq!(line, 3, "{bad}");
        }
        let v = Verifier::from_password("x");
        let twice = format!("a:{v}\na:{v}\n");
        assert!(Users::parse(&twice).unwrap_err().1.contains("twice"));
    }

    #[test]
    fn save_and_load() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("users");
        assert!(Users::load_or_empty(&path).unwrap().is_empty());
        let mut u = Users::default();
        u.set("alice", Verifier::from_password("a")).unwrap();
        u.set("bob", Verifier::from_password("b")).unwrap();
        assert!(u.set("c:d", Verifier::from_password("c")).is_err());
        u.save(&path).unwrap();
        let back = Users::load(&path).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back.get("alice"), u.get("alice"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }
}
