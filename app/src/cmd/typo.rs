//! A mistyped subcommand, caught before clap reads it as the viewer's study path (which would
//! open a window on a file that does not exist, or say "unexpected argument").

use std::ffi::OsString;
use std::path::Path;

/// Edits (insertions, deletions, substitutions) within which a word is taken for a subcommand.
const MAX_EDITS: usize = 2;

/// Why the first word of `words` (after the program and `--ort-lib FILE`) is refused: it is
/// no subcommand and no file or folder, and either close to a subcommand (the suggestion) or
/// followed by another word (a path no subcommand was given for). `None`: nothing to say.
pub fn mistyped_subcommand(words: &[OsString], subcommands: &[String]) -> Option<String> {
    let mut rest = words.iter().skip(1);
    let first = loop {
        let word = rest.next()?.to_str()?;
        if word == "--ort-lib" {
            rest.next();
        } else if word.starts_with('-') {
            // --help, --version, --ort-lib=FILE: clap's to read.
            if !word.starts_with("--ort-lib=") {
                return None;
            }
        } else {
            break word;
        }
    };
    if subcommands.iter().any(|s| s == first) || Path::new(first).exists() {
        return None;
    }
    let closest = subcommands
        .iter()
        .map(|s| (strsim::levenshtein(first, s), s))
        .filter(|(edits, s)| *edits <= MAX_EDITS && *edits < s.len())
        .min_by_key(|(edits, _)| *edits);
    match closest {
        Some((_, name)) => Some(format!(
            "unrecognized subcommand '{first}': did you mean `{name}`? (`tessera --help` lists them)"
        )),
        None if rest.next().is_some() => Some(format!(
            "unrecognized subcommand '{first}' (`tessera --help` lists them)"
        )),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(words: &[&str]) -> Option<String> {
        let names = ["detect", "info", "sweep", "sr", "view"].map(String::from);
        let words: Vec<OsString> = words.iter().map(OsString::from).collect();
        mistyped_subcommand(&words, &names)
    }

    /// What [`check`] says, empty when it says nothing.
    fn said(words: &[&str]) -> String {
        check(words).unwrap_or_default()
    }

    #[test]
    fn a_near_miss_gets_the_subcommand_it_meant() {
        let meant = "did you mean `detect`?";
        assert!(said(&["tessera", "detct"]).contains(meant));
        assert!(said(&["tessera", "detct", "study/"]).contains(meant));
        assert!(said(&["tessera", "--ort-lib", "x.so", "dteect"]).contains(meant));
        assert!(said(&["tessera", "inof"]).contains("`info`"));
        assert_eq!(
            said(&["tessera", "frobnicate", "study/"]),
            "unrecognized subcommand 'frobnicate' (`tessera --help` lists them)"
        );
    }

    #[test]
    fn subcommands_paths_and_options_pass() {
        assert_eq!(check(&["tessera", "detect", "x"]), None);
        assert_eq!(check(&["tessera", "--help"]), None);
        assert_eq!(check(&["tessera"]), None);
        // An existing path is the viewer's study, however close to a name.
        let dir = std::env::temp_dir().to_string_lossy().into_owned();
        assert_eq!(check(&["tessera", &dir]), None);
        // A lone unknown word is left to the viewer's own "no such file" refusal.
        assert_eq!(check(&["tessera", "frobnicate"]), None);
    }
}
