//! Smart HTTP(S) through libgit2, with the lease checked before sending and the per-ref status
//! checked after.

use std::cell::{Cell, RefCell};

use git2::{
    Cred, CredentialType, Direction, ErrorClass, ErrorCode, FetchOptions, Oid, PushOptions,
    RemoteCallbacks,
};

use super::{
    Credentials, ExpectedTip, GitRemote, PushOutcome, RemoteError, RemoteErrorKind, RemoteOp,
};
use crate::repo::{LocalRepo, outgoing_ref, strip_credentials, tracking_ref};

/// A remote served by libgit2 (HTTP and HTTPS).
pub struct Libgit2Remote {
    url: String,
    display: String,
    credentials: Credentials,
}

impl Libgit2Remote {
    /// A remote at `url`, authenticating with `credentials` when asked.
    #[must_use]
    pub fn new(url: &str, credentials: Credentials) -> Self {
        Self {
            url: url.to_string(),
            display: strip_credentials(url),
            credentials,
        }
    }

    /// Callbacks answering credential requests. libgit2 asks again after every refusal, so the
    /// number of answers is capped to turn bad credentials into an error instead of a loop.
    fn callbacks<'a>(&'a self, asked: &'a Cell<u32>) -> RemoteCallbacks<'a> {
        let mut cb = RemoteCallbacks::new();
        cb.credentials(move |_url, _user, allowed| {
            asked.set(asked.get() + 1);
            if asked.get() > 2 {
                return Err(git2::Error::from_str("authentication failed: credentials were refused"));
            }
            match &self.credentials {
                Credentials::Basic { username, password } if allowed.contains(CredentialType::USER_PASS_PLAINTEXT) => {
                    Cred::userpass_plaintext(username, password)
                }
                Credentials::None => Err(git2::Error::from_str(
                    "authentication failed: the remote asks for credentials and none are configured",
                )),
                _ => Err(git2::Error::from_str(
                    "authentication failed: the configured credentials do not fit what the remote asks for",
                )),
            }
        });
        cb
    }

    fn error(&self, op: RemoteOp, e: &git2::Error, asked: &Cell<u32>) -> RemoteError {
        let kind = if e.code() == ErrorCode::Auth
            || asked.get() > 0 && e.message().contains("authentication")
        {
            RemoteErrorKind::Auth
        } else if matches!(
            e.class(),
            ErrorClass::Http | ErrorClass::Net | ErrorClass::Os | ErrorClass::Ssl
        ) {
            RemoteErrorKind::Unreachable
        } else {
            RemoteErrorKind::Protocol
        };
        RemoteError::new(op, &self.display, kind, e.message().to_string())
    }

    fn advertised_tip(&self, op: RemoteOp, branch: &str) -> Result<Option<Oid>, RemoteError> {
        let asked = Cell::new(0);
        let mut remote = git2::Remote::create_detached(self.url.as_str())
            .map_err(|e| self.error(op, &e, &asked))?;
        let conn = remote
            .connect_auth(Direction::Fetch, Some(self.callbacks(&asked)), None)
            .map_err(|e| self.error(op, &e, &asked))?;
        let name = format!("refs/heads/{branch}");
        let heads = conn.list().map_err(|e| self.error(op, &e, &asked))?;
        Ok(heads
            .iter()
            .find(|h| h.name() == name)
            .map(git2::RemoteHead::oid))
    }
}

impl GitRemote for Libgit2Remote {
    fn display_url(&self) -> &str {
        &self.display
    }

    fn ls_remote(&mut self, _repo: &LocalRepo, branch: &str) -> Result<Option<Oid>, RemoteError> {
        self.advertised_tip(RemoteOp::LsRemote, branch)
    }

    fn fetch(&mut self, repo: &LocalRepo, branch: &str) -> Result<Option<Oid>, RemoteError> {
        let op = RemoteOp::Fetch;
        let local_err = |e: crate::error::RepoError| RemoteError::local(op, &self.display, &e);
        let Some(advertised) = self.advertised_tip(op, branch)? else {
            repo.remove_ref(&tracking_ref(branch)).map_err(local_err)?;
            return Ok(None);
        };
        if repo.has_object(advertised) {
            // Our own push, or a tip fetched before: nothing to download.
            repo.set_ref(&tracking_ref(branch), advertised)
                .map_err(local_err)?;
            return Ok(Some(advertised));
        }
        let asked = Cell::new(0);
        let mut remote = repo
            .git2()
            .remote_anonymous(&self.url)
            .map_err(|e| self.error(op, &e, &asked))?;
        let mut fo = FetchOptions::new();
        fo.remote_callbacks(self.callbacks(&asked));
        fo.download_tags(git2::AutotagOption::None);
        let spec = format!("+refs/heads/{branch}:{}", tracking_ref(branch));
        remote
            .fetch(&[spec.as_str()], Some(&mut fo), None)
            .map_err(|e| self.error(op, &e, &asked))?;
        // The branch may have moved between the advertisement and the fetch: the tracking ref holds
        // what was actually downloaded.
        let tip = repo.read_ref(&tracking_ref(branch)).map_err(local_err)?;
        match tip {
            Some(oid) if repo.has_object(oid) => Ok(Some(oid)),
            _ => Err(RemoteError::new(
                op,
                &self.display,
                RemoteErrorKind::Protocol,
                "fetch did not bring the branch tip",
            )),
        }
    }

    fn push(
        &mut self,
        repo: &LocalRepo,
        branch: &str,
        new: Oid,
        expected: ExpectedTip,
    ) -> Result<PushOutcome, RemoteError> {
        let op = RemoteOp::Push;
        let source = outgoing_ref(branch);
        repo.set_ref(&source, new)
            .map_err(|e| RemoteError::local(op, &self.display, &e))?;
        let dst = format!("refs/heads/{branch}");
        let expected_oid = expected.oid().unwrap_or(Oid::ZERO_SHA1);
        let asked = Cell::new(0);
        let stale: Cell<Option<Oid>> = Cell::new(None);
        let status: RefCell<Option<Option<String>>> = RefCell::new(None);
        let result = {
            let mut remote = repo
                .git2()
                .remote_anonymous(&self.url)
                .map_err(|e| self.error(op, &e, &asked))?;
            let mut cb = self.callbacks(&asked);
            // The lease: the advertised tip must be the one we built on, checked before any
            // object is sent. The server then applies "<old> <new> <ref>" atomically, so a move
            // after this check still comes back as a per-ref rejection below.
            cb.push_negotiation(|updates| {
                for u in updates {
                    if u.dst_refname() == Ok(dst.as_str()) && u.src() != expected_oid {
                        stale.set(Some(u.src()));
                        return Err(git2::Error::from_str("stale lease"));
                    }
                }
                Ok(())
            });
            cb.push_update_reference(|refname, st| {
                if refname == dst {
                    *status.borrow_mut() = Some(st.map(str::to_string));
                }
                Ok(())
            });
            let mut po = PushOptions::new();
            po.remote_callbacks(cb);
            // Not a forced refspec: what we push always descends from the expected tip.
            remote.push(&[format!("{source}:{dst}")], Some(&mut po))
        };
        if let Some(actual) = stale.get() {
            let actual = if actual.is_zero() {
                "(absent)".to_string()
            } else {
                actual.to_string()
            };
            return Ok(PushOutcome::Rejected {
                reason: format!("stale info: expected {expected}, remote has {actual}"),
            });
        }
        match result {
            Err(e) if e.code() == ErrorCode::NotFastForward => Ok(PushOutcome::Rejected {
                reason: format!("non-fast-forward: {}", e.message()),
            }),
            Err(e) => Err(self.error(op, &e, &asked)),
            Ok(()) => match status.into_inner() {
                Some(None) => Ok(PushOutcome::Accepted),
                Some(Some(reason)) => Ok(PushOutcome::Rejected { reason }),
                None => Err(RemoteError::new(
                    op,
                    &self.display,
                    RemoteErrorKind::Protocol,
                    format!("the remote reported no status for {dst}"),
                )),
            },
        }
    }
}
