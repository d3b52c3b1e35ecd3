//! One rule for secrets in what hookprof records: a command line or an environment kept
//! anywhere (results, the store, the spool, exports, messages) has the value of every key that
//! names a secret masked, in each form it takes: `key=value` (an environment's `KEY=VALUE`
//! too), `--key=value`, `--key value`, `Key: value` (a header), a URL's password
//! (`scheme://user:***@host`), a URL's query parameter (`?token=***`), a pair inside a word of
//! several (`host=h password=***`, `Server=s;Pwd=***`, `-o user=u,password=***`), and a secret
//! that needs no key because its shape says what it is (a GitHub, GitLab, Slack, Stripe, AWS,
//! Google or npm key, a JWT, a bearer token, a PEM private key). Every caller goes
//! through [`masked_argv`] (a command line as its words) or [`masked_text`] (a shell command or
//! a message, split into words here), so a form added here holds everywhere.
use std::borrow::Cow;

/// What a secret value is recorded as.
pub const MASK: &str = "***";

/// Parts of a key that name a secret wherever they appear in it (`PGPASSWORD`,
/// `AWS_SECRET_ACCESS_KEY`, `--api-token`).
const SECRET_PARTS: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "credential",
    "apikey",
    "privatekey",
    "authorization",
    "cookie",
];

/// Words that name a secret only as a whole word of the key (`MYSQL_PWD`, `--key`, `api-key`,
/// `--auth`), not inside another (`keyboard`, `author`, `compass`).
const SECRET_WORDS: &[&str] = &["pwd", "pass", "pw", "key", "auth", "bearer", "sig"];

/// True when `key` (a flag, an environment variable, a parameter, a header; any case, any
/// leading dashes) names a secret.
pub fn names_secret(key: &str) -> bool {
    let key = key.trim_start_matches('-').to_ascii_lowercase();
    SECRET_PARTS.iter().any(|part| key.contains(part))
        || key
            .split(|c: char| !c.is_ascii_alphanumeric())
            .any(|word| SECRET_WORDS.contains(&word))
}

/// Commands known to take a secret as a short option whose name does not say so, and those
/// options: a value after the option (`-p VALUE`), or joined to a one-letter one (`-pVALUE`).
/// Over-masking is the safe side: mysql reads `-p db` as a prompt and a database, masked too.
const SHORT_SECRET_OPTIONS: &[(&[&str], &[&str])] = &[
    (
        &[
            "mysql",
            "mysqladmin",
            "mysqldump",
            "mysqlimport",
            "mysqlshow",
            "mysqlcheck",
            "mariadb",
            "mariadb-admin",
            "mariadb-dump",
            "sshpass",
            "7z",
            "7za",
            "unrar",
        ],
        &["-p"],
    ),
    (&["zip", "unzip"], &["-P"]),
    (&["redis-cli"], &["-a"]),
    (
        &[
            "ldapsearch",
            "ldapmodify",
            "ldapadd",
            "ldapdelete",
            "ldapwhoami",
            "ldappasswd",
        ],
        &["-w"],
    ),
    // user:password
    (&["curl"], &["-u", "--user", "-U", "--proxy-user"]),
    // user%password
    (&["smbclient", "rpcclient"], &["-U", "--user"]),
    // pass:VALUE
    (&["openssl"], &["-passin", "-passout", "-pass", "-k"]),
];

/// The short secret options of the command `word` names (by its file name), if it is one.
fn short_secret_options(word: &str) -> Option<&'static [&'static str]> {
    let name = word.rsplit('/').next().unwrap_or(word);
    SHORT_SECRET_OPTIONS
        .iter()
        .find(|(commands, _)| commands.contains(&name))
        .map(|&(_, options)| options)
}

/// A command line with every secret masked. A flag that names a secret without `=` (`--password`)
/// has the next word masked, unless that word is itself a long option (`--password-stdin
/// --username u`) or another flag naming a secret (whose own value is masked then): a password
/// is not written `--...`, an option after a boolean flag is. After a command of
/// [`SHORT_SECRET_OPTIONS`] (`mysql`, `/usr/bin/sshpass`), its short options' values too.
pub fn masked_argv<S: AsRef<str>>(argv: &[S]) -> Vec<String> {
    let mut out = Vec::with_capacity(argv.len());
    let mut value_next = false;
    let mut short: &[&str] = &[];
    for arg in argv {
        let arg = arg.as_ref();
        let short_flag = short.contains(&arg);
        let is_option = arg.starts_with("--") || is_secret_flag(arg) || short_flag;
        if std::mem::take(&mut value_next) && !is_option {
            out.push(MASK.to_string());
            continue;
        }
        value_next = is_secret_flag(arg) || short_flag;
        if let Some(options) = short_secret_options(arg) {
            short = options;
        }
        match joined_short_value(short, arg) {
            Some(kept) => out.push(format!("{kept}{MASK}")),
            None => out.push(masked_word(arg).into_owned()),
        }
    }
    out
}

/// What `arg` keeps of itself when it carries the value of an option of `short`: the option
/// of a value joined to a one-letter one (`-pVALUE`), or the option and `=` (`--user=VALUE`).
fn joined_short_value(short: &[&str], arg: &str) -> Option<String> {
    short.iter().find_map(|o| {
        let rest = arg.strip_prefix(o)?;
        if rest.starts_with('=') {
            Some(format!("{o}="))
        } else {
            (o.len() == 2 && !rest.is_empty()).then(|| o.to_string())
        }
    })
}

/// `text` (a shell command, a message, words joined by spaces) with every secret masked: its
/// words as [`masked_argv`] masks them, quotes kept together (`--password 'a b'` is one
/// value), the spaces between them as they were.
pub fn masked_text(text: &str) -> String {
    let spans = words(text);
    // A word quoted whole is masked as the word it quotes, and quoted again.
    let quoted: Vec<Option<char>> = spans
        .iter()
        .map(|&(start, end)| {
            let word = &text[start..end];
            let first = word.chars().next()?;
            (matches!(first, '\'' | '"') && word.len() >= 2 && word.ends_with(first))
                .then_some(first)
        })
        .collect();
    let words: Vec<&str> = spans
        .iter()
        .zip(&quoted)
        .map(|(&(start, end), quote)| match quote {
            Some(_) => &text[start + 1..end - 1],
            None => &text[start..end],
        })
        .collect();
    let masked = masked_argv(&words);
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for ((&(start, end), word), quote) in spans.iter().zip(masked).zip(quoted) {
        out.push_str(&text[at..start]);
        match quote {
            Some(q) => out.extend([q.to_string(), word, q.to_string()]),
            None => out.push_str(&word),
        }
        at = end;
    }
    out.push_str(&text[at..]);
    // A shape across words (`Bearer TOKEN`) is the text's, not one word's.
    without_shaped_secrets(Cow::Owned(out)).into_owned()
}

/// A flag (`-k`, `--key`) that names a secret and has no `=value` of its own.
fn is_secret_flag(arg: &str) -> bool {
    arg.starts_with('-') && !arg.contains('=') && is_key(arg) && names_secret(arg)
}

/// Something that can be a key: no spaces, quotes or URL punctuation (`-Dpassword`,
/// `PGPASSWORD`, `--api-key`, `X-Auth-Token`).
fn is_key(s: &str) -> bool {
    !s.trim_start_matches('-').is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// One word with the secrets it holds itself masked: `key=value`, `Key: value`, URLs, the
/// pairs of a word of several, a script in one word (`sh -c '... --password p'`), and secrets
/// known by their shape.
fn masked_word(word: &str) -> Cow<'_, str> {
    let keyed = masked_pair(word).or_else(|| {
        if words(word).len() > 1 {
            // Each of its words is shorter than it: the recursion ends.
            Some(masked_text(word))
        } else {
            masked_pairs(word)
        }
    });
    let word = match keyed {
        Some(masked) => Cow::Owned(masked),
        None if word.contains("://") || word.contains(['?', '&']) => {
            Cow::Owned(without_passwords(word))
        }
        None => Cow::Borrowed(word),
    };
    without_shaped_secrets(word)
}

/// What a shaped secret becomes: a bearer token keeps the word before it (group 1), every other
/// shape (no group 1) is [`MASK`] whole.
const SHAPE_MASK: &str = "${1}***";

/// `text` with every secret of [`SHAPED_SECRETS`] masked as [`SHAPE_MASK`] says.
fn without_shaped_secrets(text: Cow<'_, str>) -> Cow<'_, str> {
    match SHAPED_SECRETS.replace_all(&text, SHAPE_MASK) {
        Cow::Owned(masked) => Cow::Owned(masked),
        Cow::Borrowed(_) => text,
    }
}

/// `key=value` or `Key: value` whose key names a secret, with the value masked.
fn masked_pair(word: &str) -> Option<String> {
    ["=", ": "].into_iter().find_map(|separator| {
        let (key, _) = word.split_once(separator)?;
        (is_key(key) && names_secret(key)).then(|| format!("{key}{separator}{MASK}"))
    })
}

/// A word of pairs: a connection string's (`Server=s;Pwd=p;`, as ODBC takes it) or mount
/// options' (`user=u,password=p`), each part masked as a pair of its own; None where no part
/// held a secret.
fn masked_pairs(word: &str) -> Option<String> {
    let separator = |c: char| matches!(c, ';' | ',');
    if !word.contains(separator) {
        return None;
    }
    let mut masked = false;
    let parts: Vec<String> = word
        .split_inclusive(separator)
        .map(|part| {
            let (pair, end) = match part.strip_suffix(separator) {
                Some(pair) => (pair, &part[pair.len()..]),
                None => (part, ""),
            };
            match masked_pair(pair) {
                Some(m) => {
                    masked = true;
                    format!("{m}{end}")
                }
                None => part.to_string(),
            }
        })
        .collect();
    masked.then(|| parts.concat())
}

/// Secrets known by their shape alone, wherever they stand in a word: the token formats the
/// big issuers document (prefix and length), a JWT (three base64url parts, a JSON header
/// first), a bearer token, and a PEM private key through its end line or the word's end.
static SHAPED_SECRETS: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(concat!(
        r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}",
        r"|glpat-[A-Za-z0-9_-]{20,}",
        r"|xox[abposr]-[A-Za-z0-9-]{10,}",
        r"|[sr]k_(?:live|test)_[A-Za-z0-9]{10,}",
        r"|sk-[A-Za-z0-9_-]{20,}",
        r"|(?:AKIA|ASIA)[A-Z0-9]{16}",
        r"|AIza[A-Za-z0-9_-]{35}",
        r"|npm_[A-Za-z0-9]{36}",
        r"|eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*)",
        r"|(?i:(\bbearer\s+))[A-Za-z0-9._~+/-]+=*",
        r"|-----BEGIN [A-Z ]*PRIVATE KEY-----(?s:.*?)(?:-----END [A-Z ]*PRIVATE KEY-----|\z)",
    ))
    .expect("the secret shapes are a valid pattern")
});

/// The spans of `text`'s words: runs of non-space, where a quoted part (`'a b'`, `"a b"`)
/// belongs to its word whole.
fn words(text: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut start = None;
    let mut quote = None;
    for (i, c) in text.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => {
                quote = Some(c);
                start.get_or_insert(i);
            }
            (None, c) if c.is_whitespace() => {
                if let Some(s) = start.take() {
                    spans.push((s, i));
                }
            }
            (None, _) => {
                start.get_or_insert(i);
            }
        }
    }
    if let Some(s) = start {
        spans.push((s, text.len()));
    }
    spans
}

/// `text` with every URL password in it masked: `scheme://USER:***@HOST` and `?password=***`
/// (any query key that names a secret). The user information ends at the last '@' before the
/// query: a password may hold a '/' or an '@' that should have been escaped, which a URL
/// parser would take for the path, so this reads the text as a person would, not as a parser.
pub fn without_passwords(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        let word = tail.find(char::is_whitespace).unwrap_or(tail.len());
        let before_query = tail[..word].find(['?', '#']).unwrap_or(word);
        let user = tail[..before_query]
            .rfind('@')
            .and_then(|at| Some((tail[..at].split_once(':')?.0, at)))
            // A '/' in the user name is a path's ('sqlite:///a:b@c.db'), not a user's.
            .filter(|(user, _)| !user.contains('/'));
        match user {
            Some((user, at)) => {
                out.push_str(user);
                out.push(':');
                out.push_str(MASK);
                rest = &tail[at..];
            }
            None => rest = tail,
        }
    }
    out.push_str(rest);
    without_secret_parameters(&out)
}

/// `key=value` pairs after a '?' or '&' whose key names a secret, with the value masked.
fn without_secret_parameters(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(['?', '&']) {
        let (head, tail) = rest.split_at(i + 1);
        out.push_str(head);
        let end = tail
            .find(|c: char| c == '&' || c == '#' || c.is_whitespace())
            .unwrap_or(tail.len());
        match tail[..end].split_once('=') {
            Some((key, _)) if names_secret(key) => {
                out.push_str(key);
                out.push('=');
                out.push_str(MASK);
            }
            _ => out.push_str(&tail[..end]),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn keys_that_name_secrets_are_known_in_any_case_and_spelling() {
        for key in [
            "password",
            "--password",
            "PGPASSWORD",
            "MYSQL_PWD",
            "--api-key",
            "apikey",
            "AWS_SECRET_ACCESS_KEY",
            "GITHUB_TOKEN",
            "-Dpassword",
            "--auth",
            "Authorization",
            "X-Auth-Token",
            "--client-credentials",
            "sslpassword",
            "passwd",
        ] {
            assert!(names_secret(key), "{key}");
        }
        for key in [
            "--label",
            "--workloads",
            "keyboard",
            "author",
            "--stack-passes",
            "--baseline-keep",
            "HOME",
            "monkey",
        ] {
            assert!(!names_secret(key), "{key}");
        }
    }

    #[test]
    fn a_secret_is_masked_in_every_form_a_command_line_gives_it() {
        let argv = [
            "stat",
            "--",
            "cmd",
            "password=hunter2",
            "--password=hunter3",
            "--token",
            "hunter4",
            "PGPASSWORD=hunter5",
            "postgres://u:hunter6@h/d?sslpassword=hunter7&x=1",
            "Authorization: Bearer hunter8",
            "--password-stdin",
            "--username",
            "alice",
            "-Dsecret.key=hunter9",
        ];
        let masked = masked_argv(&argv);
        let joined = masked.join(" ");
        assert!(!joined.contains("hunter"), "{joined}");
        assert_eq!(
            masked,
            [
                "stat",
                "--",
                "cmd",
                "password=***",
                "--password=***",
                "--token",
                "***",
                "PGPASSWORD=***",
                "postgres://u:***@h/d?sslpassword=***&x=1",
                "Authorization: ***",
                "--password-stdin",
                "--username",
                "alice",
                "-Dsecret.key=***",
            ]
        );
    }

    #[test]
    fn a_secret_known_by_its_shape_is_masked_with_no_key_naming_it() {
        assert!(
            SHAPE_MASK.ends_with(MASK),
            "a shape is masked as every secret is"
        );
        // Made-up values of each issuer's documented shape.
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJlX29mX3Rlc3Q";
        for (word, kept) in [
            ("ghp_0123456789abcdefghijABCDEFGHIJ012345", ""),
            ("github_pat_11ABCDEFG0123456789_abcdefghijklmnop", ""),
            ("glpat-abcdefghij0123456789", ""),
            ("xoxb-123456789012-abcdefghij", ""),
            ("sk_live_0123456789abcdef", ""),
            ("sk-proj-abcdefghijklmnopqrstuvwx", ""),
            ("AKIAIOSFODNN7EXAMPLE", ""),
            ("AIzaSyA-0123456789abcdefghijklmnopqrstu", ""),
            ("npm_0123456789abcdefghijklmnopqrstuvwxyz", ""),
            (jwt, ""),
        ] {
            assert_eq!(masked_argv(&[word]), [format!("{kept}{MASK}")], "{word}");
            // Inside a longer word, and in a message.
            let url = format!("https://h/cb?state=1&id={word}");
            assert_eq!(
                masked_argv(&[url.as_str()]),
                [format!("https://h/cb?state=1&id={MASK}")]
            );
            let said = format!("clone failed with {word}: denied");
            assert_eq!(
                masked_text(&said),
                format!("clone failed with {MASK}: denied")
            );
        }
        assert_eq!(
            masked_argv(&["-H", "X-Token-Echo: Bearer abc.def-ghi"]),
            ["-H", "X-Token-Echo: ***"]
        );
        assert_eq!(
            masked_text("got bearer abc.def-ghi== back"),
            "got bearer *** back"
        );
        let pem = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE KEY-----";
        assert_eq!(
            masked_argv(&[format!("key {pem} tail")]),
            [format!("key {MASK} tail")]
        );
        assert_eq!(
            masked_argv(&["-----BEGIN RSA PRIVATE KEY-----\nMIIEow"]),
            [MASK]
        );
        // Words of the same look that are no secret stay.
        for word in [
            "sk-learn",
            "AKIA",
            "eyJ",
            "bearer",
            "ghp_short",
            "-----BEGIN PUBLIC KEY-----",
            "xoxo-gossip",
        ] {
            assert_eq!(masked_argv(&[word]), [word]);
        }
    }

    #[test]
    fn the_pairs_of_a_word_of_several_are_masked_each() {
        for (word, masked) in [
            (
                "host=db user=bob password=hunter2 port=5432",
                "host=db user=bob password=*** port=5432",
            ),
            (
                "Driver={x};Server=s;Uid=u;Pwd=hunter2;",
                "Driver={x};Server=s;Uid=u;Pwd=***;",
            ),
            (
                "username=u,password=hunter2,vers=3.0",
                "username=u,password=***,vers=3.0",
            ),
            ("mysql -u root -phunter2 db", "mysql -u root -p*** db"),
            (
                "curl --password hunter2 http://h",
                "curl --password *** http://h",
            ),
        ] {
            assert_eq!(masked_argv(&["sh", "-c", word])[2], masked, "{word}");
        }
        for word in ["a,b", "x=1;y=2", "--hooks=a,b", "one two"] {
            assert_eq!(masked_argv(&[word]), [word]);
        }
    }

    #[test]
    fn a_shell_command_keeps_its_spacing_and_loses_its_secrets() {
        assert_eq!(
            masked_text("env  PGPASSWORD=s1 psql --password 'two words' -c 'select 1'"),
            "env  PGPASSWORD=*** psql --password '***' -c 'select 1'"
        );
        assert_eq!(
            masked_text("curl -H \"Authorization: Bearer s2\" https://u:s3@h/"),
            "curl -H \"Authorization: ***\" https://u:***@h/"
        );
        assert_eq!(
            masked_text("plain words, no secret"),
            "plain words, no secret"
        );
    }

    #[test]
    fn passwords_are_masked_wherever_a_url_is() {
        for (given, kept) in [
            (
                "--store=postgres://u:pw@h/d",
                "--store=postgres://u:***@h/d",
            ),
            (
                "postgresql://u:p/w@d@h:1/d?x=1",
                "postgresql://u:***@h:1/d?x=1",
            ),
            (
                "a postgres://u:x@h b://v:y@w",
                "a postgres://u:***@h b://v:***@w",
            ),
            ("postgres://u@h/d", "postgres://u@h/d"),
            ("x?sslpassword=s&a=b", "x?sslpassword=***&a=b"),
            (
                "x?access_token=s&api_key=t",
                "x?access_token=***&api_key=***",
            ),
            ("sqlite:///tmp/a:b@c.db", "sqlite:///tmp/a:b@c.db"),
            ("plain text", "plain text"),
        ] {
            assert_eq!(without_passwords(given), kept, "{given}");
        }
    }

    /// A secret value: no space (a word), not a long option, and marked so it can be found.
    fn secret() -> impl Strategy<Value = String> {
        "[A-Za-z0-9!#$%()*+,./:;<>@^_{|}~-]{0,12}".prop_map(|s| format!("S3cr{s}"))
    }

    fn secret_key() -> impl Strategy<Value = String> {
        prop::sample::select(vec![
            "password",
            "PGPASSWORD",
            "passwd",
            "pwd",
            "MYSQL_PWD",
            "secret",
            "client_secret",
            "token",
            "GITHUB_TOKEN",
            "key",
            "api-key",
            "apikey",
            "credential",
            "auth",
            "x-auth-token",
        ])
        .prop_map(str::to_string)
    }

    /// One word or two of a command line carrying `value` under `key`, in one of the forms.
    fn carried(key: &str, value: &str, form: u8) -> Vec<String> {
        match form {
            0 => vec![format!("{key}={value}")],
            1 => vec![format!("--{key}={value}")],
            2 => vec![format!("--{key}"), value.to_string()],
            3 => vec![format!("-{key}"), value.to_string()],
            4 => vec![format!("{}={value}", key.to_uppercase())],
            // In a URL a value is percent-encoded, as a URL must hold it.
            _ => {
                let mut url = url::Url::parse("postgres://user@[::1]:5432/db").unwrap();
                url.set_password(Some(value)).unwrap();
                url.query_pairs_mut().append_pair(key, value);
                vec![url.to_string()]
            }
        }
    }

    #[test]
    fn a_short_option_of_a_command_known_to_take_a_password_has_its_value_masked() {
        let masked = masked_text(
            "mysql -uroot -phunter1 -h db; /usr/bin/sshpass -p 'hunter 2' ssh h; \
             redis-cli -a hunter3 ping; curl -u alice:hunter4 https://h/; \
             openssl enc -pass pass:hunter5 -in f; ldapsearch -D cn=a -w hunter6",
        );
        assert!(!masked.contains("hunter"), "{masked}");
        assert!(masked.starts_with("mysql -uroot -p*** -h db;"), "{masked}");
        assert!(masked.contains("sshpass -p '***' ssh h;"), "{masked}");
        // The same letters elsewhere are no secret: a port, a pid, hookprof's own -p.
        for kept in [
            "ssh -p 2222 h",
            "top -p 1",
            "hookprof top -p 42",
            "mysql -P 3306",
        ] {
            assert_eq!(masked_text(kept), kept);
        }
    }

    /// A command known to take a password by a short option, and that option.
    fn short_secret_option() -> impl Strategy<Value = (String, String)> {
        prop::sample::select(
            SHORT_SECRET_OPTIONS
                .iter()
                .flat_map(|(commands, options)| {
                    commands.iter().flat_map(move |c| {
                        options.iter().map(move |o| (c.to_string(), o.to_string()))
                    })
                })
                .collect::<Vec<_>>(),
        )
    }

    proptest! {
        #[test]
        fn no_generated_secret_survives_a_short_option_of_a_command_that_takes_it(
            (command, option) in short_secret_option(),
            value in secret(),
            joined in any::<bool>(),
            dir in prop::sample::select(vec!["", "/usr/bin/", "./"]),
            before in prop::collection::vec("-[a-z]", 0..3),
        ) {
            let mut argv = vec![format!("{dir}{command}")];
            argv.extend(before);
            if joined {
                let joint = if option.len() == 2 { "" } else { "=" };
                argv.push(format!("{option}{joint}{value}"));
            } else {
                argv.extend([option, value]);
            }
            argv.push("--after".into());
            let masked = masked_argv(&argv).join(" ");
            prop_assert!(!masked.contains("S3cr"), "{argv:?} -> {masked}");
            prop_assert!(masked.ends_with("--after"), "{argv:?} -> {masked}");
        }

        #[test]
        fn no_generated_secret_survives_masking_in_any_form(
            key in secret_key(),
            value in secret(),
            form in 0u8..6,
            before in prop::collection::vec("[a-z -]{0,8}", 0..3),
        ) {
            let mut argv: Vec<String> = before.clone();
            argv.extend(carried(&key, &value, form));
            argv.push("--after".into());
            let masked = masked_argv(&argv).join(" ");
            prop_assert!(!masked.contains("S3cr"), "{argv:?} -> {masked}");
            let text = masked_text(&argv.join(" "));
            prop_assert!(!text.contains("S3cr"), "{argv:?} -> {text}");
            // What is not a secret stays.
            prop_assert!(masked.ends_with("--after") && text.ends_with("--after"));
        }

        #[test]
        fn no_generated_secret_of_a_known_shape_survives_wherever_it_stands(
            token in shaped_secret(),
            // A token stands after a separator (`\b`): glued to a word, it is that word's.
            before in "([a-z]{0,6}[ =,;:?&/])?",
            after in "[ ,;&#/]{1,3}[a-z]{0,6}",
            split in any::<bool>(),
        ) {
            let word = format!("{before}{token}{after}");
            let argv: Vec<String> = if split {
                vec!["cmd".into(), word.clone(), "--after".into()]
            } else {
                vec![format!("cmd {word} --after")]
            };
            let masked = masked_argv(&argv).join(" ");
            prop_assert!(!masked.contains(&token), "{argv:?} -> {masked}");
            prop_assert!(masked.ends_with("--after"), "{argv:?} -> {masked}");
            let text = masked_text(&argv.join(" "));
            prop_assert!(!text.contains(&token), "{argv:?} -> {text}");
        }
    }

    /// A token of one of the shapes [`SHAPED_SECRETS`] knows, of a length its issuer makes.
    fn shaped_secret() -> impl Strategy<Value = String> {
        prop_oneof![
            "gh[pousr]_[A-Za-z0-9]{36}",
            "github_pat_[A-Za-z0-9_]{40}",
            "glpat-[A-Za-z0-9_-]{20}",
            "xox[abp]-[0-9]{12}-[A-Za-z0-9]{24}",
            "[sr]k_live_[A-Za-z0-9]{24}",
            "sk-[A-Za-z0-9_-]{48}",
            "(AKIA|ASIA)[A-Z0-9]{16}",
            "AIza[A-Za-z0-9_-]{35}",
            "npm_[A-Za-z0-9]{36}",
            "eyJ[A-Za-z0-9_-]{10,20}[.]eyJ[A-Za-z0-9_-]{10,40}[.][A-Za-z0-9_-]{20,43}",
        ]
    }
}
