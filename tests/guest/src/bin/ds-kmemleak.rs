//! After a campaign on the debug or cov kernel: `ds-kmemleak` scans with kmemleak and prints
//! every unreferenced object allocated with a module frame on its stack; exits 1 if there is
//! one.
//! Ends with `kmemleak: N unreferenced objects, K from neuron_ds`.

use neuron_ds_guest_tests::kmemleak;
use std::process::exit;

fn main() {
    let Some(leaks) = kmemleak::scan() else {
        eprintln!("ds-kmemleak: this kernel has no kmemleak (the debug and cov variants have)");
        exit(2);
    };
    let ours: Vec<_> = leaks.iter().filter(|l| l.from_module).collect();
    for leak in &ours {
        println!("{}", leak.text);
    }
    println!(
        "kmemleak: {} unreferenced objects, {} from neuron_ds",
        leaks.len(),
        ours.len()
    );
    if !ours.is_empty() {
        exit(1);
    }
}
