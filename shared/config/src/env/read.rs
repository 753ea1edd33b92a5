//! Reading declared variables from an environment lookup: every problem is collected (one
//! line each) instead of stopping at the first, and what each variable resolved to is kept,
//! already masked, for `hermes doctor`.

use std::collections::BTreeMap;

use super::{Unset, Var};

/// Reads typed values of declared variables from an environment.
pub(crate) struct Reader<'a> {
    env: &'a dyn Fn(&str) -> Option<String>,
    /// Everything wrong so far, one problem per entry.
    pub(crate) problems: Vec<String>,
    /// What each variable read resolved to, as `doctor` shows it (secrets masked).
    pub(crate) shown: BTreeMap<&'static str, String>,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(env: &'a dyn Fn(&str) -> Option<String>) -> Self {
        Self {
            env,
            problems: Vec::new(),
            shown: BTreeMap::new(),
        }
    }

    /// The trimmed value of a declared variable; blank counts as unset.
    fn raw<T>(&self, var: &Var<T>) -> Option<String> {
        (self.env)(var.name())
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    }

    fn parse<T>(&mut self, var: &'static Var<T>, value: &str) -> Option<T> {
        match (var.kind.parse)(var.name(), value) {
            Ok(v) => {
                self.shown.insert(var.name(), (var.kind.show)(&v));
                Some(v)
            }
            Err(problems) => {
                self.shown.insert(var.name(), "(invalid)".into());
                self.problems.extend(problems);
                None
            }
        }
    }

    /// The value of `var`, its declared default when unset; `None` when unset without a
    /// default, or invalid (then the problem is recorded).
    pub(crate) fn get<T>(&mut self, var: &'static Var<T>) -> Option<T> {
        match (self.raw(var), var.setting.unset) {
            (Some(value), _) => self.parse(var, &value),
            (None, Unset::Value(default)) => self.parse(var, default),
            (None, Unset::Means(meaning)) => {
                self.shown.insert(var.name(), meaning.to_string());
                None
            }
        }
    }

    /// Whether `var` is set (not blank), without reading it.
    pub(crate) fn is_set<T>(&self, var: &Var<T>) -> bool {
        self.raw(var).is_some()
    }

    /// Show `text` for `var` in `doctor`, in place of what reading it recorded (a value that
    /// also has another source, such as `--config` for `HERMES_CONFIG`).
    pub(crate) fn show_as<T>(&mut self, var: &Var<T>, text: String) {
        self.shown.insert(var.name(), text);
    }

    /// Record a problem that involves more than one variable.
    pub(crate) fn problem(&mut self, text: impl Into<String>) {
        self.problems.push(text.into());
    }
}
