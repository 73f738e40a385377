//! The election core against the Lease contract, step by step.

use std::time::{Duration, Instant, SystemTime};

use backflow_leader::{
    Election, ElectionConfig, ElectionEffect, ElectionInput, Leadership, LeaseRecord, TimingError,
    WriteFailure,
};

/// A candidate and a clock it is stepped with.
struct Candidate {
    election: Election,
    start: Instant,
    at: Duration,
}

impl Candidate {
    fn new(identity: &str) -> Self {
        let start = Instant::now();
        Self {
            election: Election::new(ElectionConfig::new(identity), start),
            start,
            at: Duration::ZERO,
        }
    }

    fn step(&mut self, input: ElectionInput) -> Vec<ElectionEffect> {
        let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000) + self.at;
        self.election.step(input, self.start + self.at, wall)
    }

    fn after(&mut self, secs: u64, input: ElectionInput) -> Vec<ElectionEffect> {
        self.at += Duration::from_secs(secs);
        self.step(input)
    }
}

fn held_by(holder: &str, transitions: i32) -> LeaseRecord {
    LeaseRecord {
        holder: Some(holder.into()),
        lease_duration: Duration::from_secs(15),
        acquire_time: None,
        renew_time: None,
        transitions,
    }
}

fn became(effects: &[ElectionEffect]) -> Option<&Leadership> {
    effects.iter().find_map(|e| match e {
        ElectionEffect::Became(l) => Some(l),
        _ => None,
    })
}

fn written(effects: &[ElectionEffect]) -> Option<LeaseRecord> {
    effects.iter().find_map(|e| match e {
        ElectionEffect::Create(r) | ElectionEffect::Update { record: r, .. } => Some(r.clone()),
        _ => None,
    })
}

#[test]
fn the_first_candidate_creates_the_lease_and_leads() {
    let mut a = Candidate::new("a");
    assert_eq!(a.step(ElectionInput::Tick), vec![ElectionEffect::Read]);
    let create = a.step(ElectionInput::Read(Ok(None)));
    let record = written(&create).expect("creates the Lease");
    assert_eq!(record.holder.as_deref(), Some("a"));
    assert_eq!(record.transitions, 0);
    assert!(record.renew_time.is_some() && record.acquire_time.is_some());
    let led = a.step(ElectionInput::Written(Ok((record, "1".into()))));
    assert_eq!(became(&led), Some(&Leadership::Leading));
    assert!(a.election.leading());
    // It renews every retry period, naming the version it read.
    let renew = a.after(2, ElectionInput::Tick);
    assert_eq!(renew, vec![ElectionEffect::Read]);
    let update = a.step(ElectionInput::Read(Ok(Some((held_by("a", 0), "1".into())))));
    assert!(
        matches!(&update[..], [ElectionEffect::Update { record, version }] if record.holder.as_deref() == Some("a") && version == "1"),
        "{update:?}"
    );
}

#[test]
fn a_standby_takes_over_only_after_the_holder_let_the_lease_expire() {
    let mut b = Candidate::new("b");
    b.step(ElectionInput::Tick);
    let standby = b.step(ElectionInput::Read(Ok(Some((held_by("a", 3), "7".into())))));
    assert_eq!(
        became(&standby),
        Some(&Leadership::Following {
            holder: Some("a".into())
        })
    );
    assert!(written(&standby).is_none(), "never writes a fresh Lease");
    // The holder renews: the record changes, so it stays fresh however long it lasts.
    for second in 1..=20 {
        b.after(1, ElectionInput::Tick);
        let mut renewed = held_by("a", 3);
        renewed.renew_time = Some(SystemTime::UNIX_EPOCH + Duration::from_secs(second));
        let effects = b.step(ElectionInput::Read(Ok(Some((
            renewed,
            format!("{}", 7 + second),
        )))));
        assert!(written(&effects).is_none(), "second {second}: {effects:?}");
    }
    // The holder stops renewing: unchanged for less than its duration, still its.
    let last = (held_by("a", 3), "99".to_string());
    b.after(2, ElectionInput::Tick);
    b.step(ElectionInput::Read(Ok(Some(last.clone()))));
    b.after(12, ElectionInput::Tick);
    let early = b.step(ElectionInput::Read(Ok(Some(last.clone()))));
    assert!(written(&early).is_none(), "{early:?}");
    // Past it: taken over, one transition more, at the version read.
    b.after(4, ElectionInput::Tick);
    let take = b.step(ElectionInput::Read(Ok(Some(last))));
    assert!(
        matches!(&take[..], [ElectionEffect::Update { record, version }] if record.holder.as_deref() == Some("b") && record.transitions == 4 && version == "99"),
        "{take:?}"
    );
}

#[test]
fn a_conflict_means_somebody_else_wrote_first() {
    let mut b = Candidate::new("b");
    b.step(ElectionInput::Tick);
    let create = b.step(ElectionInput::Read(Ok(None)));
    assert!(written(&create).is_some());
    let lost_race = b.step(ElectionInput::Written(Err(WriteFailure::Conflict)));
    assert!(became(&lost_race).is_none(), "not leading: {lost_race:?}");
    assert!(!b.election.leading());
    // It looks again after the retry period, and finds the winner.
    let again = b.after(2, ElectionInput::Tick);
    assert_eq!(again, vec![ElectionEffect::Read]);
    let follows = b.step(ElectionInput::Read(Ok(Some((held_by("a", 0), "2".into())))));
    assert!(matches!(
        became(&follows),
        Some(Leadership::Following { .. })
    ));
}

#[test]
fn a_leader_that_cannot_renew_within_its_deadline_stops_leading() {
    let mut a = Candidate::new("a");
    a.step(ElectionInput::Tick);
    let create = a.step(ElectionInput::Read(Ok(None)));
    let record = written(&create).expect("creates");
    a.step(ElectionInput::Written(Ok((record, "1".into()))));
    for _ in 0..4 {
        a.after(2, ElectionInput::Tick);
        let failed = a.step(ElectionInput::Read(Err("connection refused".into())));
        assert!(became(&failed).is_none(), "{failed:?}");
        assert!(a.election.leading());
    }
    // Past the 10 s deadline since the last renewal: lost at once, whatever the API says.
    let lost = a.after(3, ElectionInput::Tick);
    assert!(
        matches!(became(&lost), Some(Leadership::Lost(_))),
        "{lost:?}"
    );
    assert!(!a.election.leading());
}

#[test]
fn a_clean_stop_releases_the_lease() {
    let mut a = Candidate::new("a");
    a.step(ElectionInput::Tick);
    let record = written(&a.step(ElectionInput::Read(Ok(None)))).expect("creates");
    a.step(ElectionInput::Written(Ok((record.clone(), "1".into()))));
    assert_eq!(a.after(1, ElectionInput::Stop), vec![ElectionEffect::Read]);
    let release = a.step(ElectionInput::Read(Ok(Some((record, "1".into())))));
    let released = written(&release).expect("writes the release");
    assert_eq!(released.holder, None);
    assert_eq!(released.lease_duration, Duration::from_secs(1));
    assert_eq!(released.transitions, 0, "a release is no transition");
    let done = a.step(ElectionInput::Written(Ok((released, "2".into()))));
    assert!(done.contains(&ElectionEffect::Stopped), "{done:?}");
    // A standby takes a released Lease at once.
    let mut b = Candidate::new("b");
    b.step(ElectionInput::Tick);
    let mut free = held_by("a", 0);
    free.holder = None;
    let take = b.step(ElectionInput::Read(Ok(Some((free, "2".into())))));
    assert_eq!(written(&take).and_then(|r| r.holder), Some("b".into()));
}

#[test]
fn a_candidate_that_never_led_stops_without_writing() {
    let mut b = Candidate::new("b");
    b.step(ElectionInput::Tick);
    b.step(ElectionInput::Read(Ok(Some((held_by("a", 0), "1".into())))));
    assert_eq!(
        b.after(1, ElectionInput::Stop),
        vec![ElectionEffect::Stopped]
    );
}

#[test]
fn timing_a_leader_cannot_keep_is_refused_as_client_go_refuses_it() {
    let timing = |lease: f64, renew: f64, retry: f64| {
        let mut c = ElectionConfig::new("a");
        c.lease_duration = Duration::from_secs_f64(lease);
        c.renew_deadline = Duration::from_secs_f64(renew);
        c.retry_period = Duration::from_secs_f64(retry);
        c.validate()
    };
    assert_eq!(timing(15.0, 10.0, 2.0), Ok(()));
    assert_eq!(timing(4.0, 3.0, 1.0), Ok(()));
    assert_eq!(
        timing(4.5, 3.0, 1.0),
        Err(TimingError::LeaseDurationNotWholeSeconds)
    );
    assert_eq!(
        timing(10.0, 10.0, 2.0),
        Err(TimingError::RenewDeadlineNotShorterThanLease)
    );
    assert_eq!(
        timing(15.0, 2.0, 2.0),
        Err(TimingError::RenewDeadlineTooShortForRetries)
    );
}

/// A renewal counts from when it was sent: a slow answer does not stretch the leader's time.
#[test]
fn a_renewal_counts_from_when_it_was_sent() {
    let mut a = Candidate::new("a");
    a.step(ElectionInput::Tick);
    let record = written(&a.step(ElectionInput::Read(Ok(None)))).expect("creates");
    // The create's answer arrives 9 s after it was sent.
    a.after(9, ElectionInput::Tick);
    a.step(ElectionInput::Written(Ok((record, "1".into()))));
    assert!(a.election.leading());
    // 10 s after sending, without a renewal since: lost.
    let lost = a.after(2, ElectionInput::Tick);
    assert!(
        matches!(became(&lost), Some(Leadership::Lost(_))),
        "{lost:?}"
    );
}
