//! The audit log file: one JSON event per line, appended; rotated by size as kube-apiserver's
//! `--audit-log-maxsize` and `--audit-log-maxbackup` do (the full file renamed
//! `<name>-<time>.<ext>` beside it, the oldest beyond the count removed).

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Where and how the log is written.
#[derive(Debug, Clone)]
pub struct LogSettings {
    /// The file.
    pub path: PathBuf,
    /// Rotate once the file would pass this many bytes (`0`: never).
    pub max_bytes: u64,
    /// Keep this many rotated files (`0`: all).
    pub max_backups: usize,
}

struct Open {
    file: File,
    len: u64,
}

/// The audit log, shared by every request.
pub struct AuditLog {
    settings: LogSettings,
    open: Mutex<Option<Open>>,
}

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditLog")
            .field("path", &self.settings.path)
            .finish_non_exhaustive()
    }
}

impl AuditLog {
    /// A log at `settings.path`, opened (created) now so a path that cannot be written is told
    /// at start.
    ///
    /// # Errors
    /// When the file cannot be opened for appending.
    pub fn open(settings: LogSettings) -> std::io::Result<Self> {
        let open = Self::open_file(&settings.path)?;
        Ok(Self {
            settings,
            open: Mutex::new(Some(open)),
        })
    }

    fn open_file(path: &Path) -> std::io::Result<Open> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        let len = file.metadata()?.len();
        Ok(Open { file, len })
    }

    /// Appends one event (a line); a failure is logged, never fatal to the request.
    pub fn write(&self, event: &serde_json::Value) {
        let mut line = event.to_string();
        line.push('\n');
        let mut guard = self
            .open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Err(e) = self.append(&mut guard, line.as_bytes()) {
            tracing::warn!(path = %self.settings.path.display(), error = %e, "cannot write the audit log");
        }
    }

    fn append(&self, open: &mut Option<Open>, line: &[u8]) -> std::io::Result<()> {
        let full = open.as_ref().is_some_and(|o| {
            self.settings.max_bytes > 0
                && o.len > 0
                && o.len + line.len() as u64 > self.settings.max_bytes
        });
        if full {
            *open = None;
            self.rotate()?;
        }
        if open.is_none() {
            *open = Some(Self::open_file(&self.settings.path)?);
        }
        let Some(o) = open.as_mut() else {
            return Ok(());
        };
        o.file.write_all(line)?;
        o.len += line.len() as u64;
        Ok(())
    }

    /// Renames the full file aside and removes the oldest rotated ones beyond the count.
    fn rotate(&self) -> std::io::Result<()> {
        let path = &self.settings.path;
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("audit");
        let ext = path.extension().and_then(|s| s.to_str()).unwrap_or("log");
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let stamp = humantime::format_rfc3339_nanos(std::time::SystemTime::now())
            .to_string()
            .replace(':', "-")
            .trim_end_matches('Z')
            .to_string();
        let mut aside = dir.join(format!("{stem}-{stamp}.{ext}"));
        let mut n = 1;
        while aside.exists() {
            aside = dir.join(format!("{stem}-{stamp}-{n}.{ext}"));
            n += 1;
        }
        std::fs::rename(path, &aside)?;
        if self.settings.max_backups == 0 {
            return Ok(());
        }
        let prefix = format!("{stem}-");
        let suffix = format!(".{ext}");
        let mut rotated: Vec<PathBuf> = std::fs::read_dir(dir)?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(&suffix))
            })
            .collect();
        // The time in the name sorts them oldest first.
        rotated.sort();
        let excess = rotated.len().saturating_sub(self.settings.max_backups);
        for old in rotated.into_iter().take(excess) {
            std::fs::remove_file(old)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_log_is_rotated_and_only_the_newest_backups_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let log = AuditLog::open(LogSettings {
            path: path.clone(),
            max_bytes: 200,
            max_backups: 2,
        })
        .unwrap();
        for i in 0..40 {
            log.write(&serde_json::json!({"n": i, "pad": "x".repeat(40)}));
        }
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 3, "the log and two backups: {names:?}");
        let current = std::fs::read_to_string(&path).unwrap();
        assert!(current.len() <= 200, "{}", current.len());
        let last: serde_json::Value =
            serde_json::from_str(current.lines().last().unwrap()).unwrap();
        assert_eq!(last["n"], 39);
    }
}
