#[test]
fn scratch() {
    let seed: u64 = std::env::var("SEED").unwrap().parse().unwrap();
    let v = match std::env::var("V").as_deref() {
        Ok("del") => backflow_sim::Variant::WithDeletes,
        Ok("held") => backflow_sim::Variant::HeldApplier,
        _ => backflow_sim::Variant::Correct,
    };
    match backflow_sim::run(seed, v) {
        Ok(()) => println!("ok"),
        Err(f) => println!("{f}"),
    }
}
