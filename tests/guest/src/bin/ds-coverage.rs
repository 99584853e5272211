//! Adds up the coverage files of the campaigns: `ds-coverage SITES NAME=DIR [NAME=DIR...]`.
//!
//! SITES lists the module's instrumentation points, one per line: section, offset of the
//! point (the return address of its `__sanitizer_cov_trace_pc` call) in hex, 1 if it is in a
//! KUnit test function (not counted) else 0, and the function, demangled
//! (`tests/coverage.sh` makes it from the .ko). Each DIR holds the `.cov` files the processes
//! of one campaign wrote (`kcov::Collector`). Prints, per campaign and for all of them
//! together, the points reached out of the module's non-KUnit points, then every function no
//! campaign reached, and ends with `coverage: N of M module PCs (P%)`.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    process::exit,
};

/// An instrumentation point: section and offset.
type Site = (String, u64);

struct Sites {
    /// Non-KUnit points and their function.
    counted: BTreeMap<Site, String>,
    /// Points in KUnit test functions.
    kunit: BTreeSet<Site>,
}

fn read_sites(path: &str) -> Sites {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut sites = Sites {
        counted: BTreeMap::new(),
        kunit: BTreeSet::new(),
    };
    for line in text.lines() {
        let fields: Vec<&str> = line.splitn(4, '\t').collect();
        let [section, offset, kunit, function] = fields[..] else {
            panic!("{path}: bad line {line:?}");
        };
        let site = (
            section.to_owned(),
            u64::from_str_radix(offset, 16).expect("hex offset"),
        );
        if kunit == "1" {
            sites.kunit.insert(site);
        } else {
            sites.counted.insert(site, function.to_owned());
        }
    }
    sites
}

/// The points one campaign reached: counted ones, and how many matched no point at all.
struct Reached {
    counted: BTreeSet<Site>,
    kunit: usize,
    unmatched: usize,
}

fn read_campaign(dir: &str, sites: &Sites) -> Reached {
    let mut all = BTreeSet::new();
    let mut unmatched = BTreeSet::new();
    for entry in fs::read_dir(dir).unwrap_or_else(|e| panic!("{dir}: {e}")) {
        let path = entry.expect("directory entry").path();
        if path.extension().is_none_or(|e| e != "cov") {
            continue;
        }
        let text = fs::read_to_string(&path).expect("coverage file");
        for line in text.lines() {
            let Some((section, offset)) = line.split_once(' ') else {
                continue;
            };
            let Ok(offset) = u64::from_str_radix(offset, 16) else {
                continue;
            };
            let site = (section.to_owned(), offset);
            if sites.counted.contains_key(&site) || sites.kunit.contains(&site) {
                all.insert(site);
            } else {
                unmatched.insert(site);
            }
        }
    }
    let kunit = all.iter().filter(|s| sites.kunit.contains(*s)).count();
    Reached {
        counted: all
            .into_iter()
            .filter(|s| sites.counted.contains_key(s))
            .collect(),
        kunit,
        unmatched: unmatched.len(),
    }
}

fn percent(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

fn line(name: &str, reached: &Reached, total: usize) {
    println!(
        "{name:<16} {:>6} of {total} module PCs ({:.1}%){}",
        reached.counted.len(),
        percent(reached.counted.len(), total),
        if reached.unmatched > 0 || reached.kunit > 0 {
            format!(
                "  [{} KUnit points, {} points matching no instrumentation point]",
                reached.kunit, reached.unmatched
            )
        } else {
            String::new()
        }
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((sites_path, rest)) = args.split_first() else {
        eprintln!("usage: ds-coverage SITES NAME=DIR...");
        exit(2);
    };
    let sites = read_sites(sites_path);
    let total = sites.counted.len();
    let parse = |arg: &String| {
        let (name, dir) = arg.split_once('=').expect("NAME=DIR");
        (name.to_owned(), read_campaign(dir, &sites))
    };
    println!(
        "\n== module coverage ({total} instrumentation points outside KUnit tests, {} in them)",
        sites.kunit.len()
    );
    let mut combined = Reached {
        counted: BTreeSet::new(),
        kunit: 0,
        unmatched: 0,
    };
    for (name, reached) in rest.iter().map(parse) {
        line(&name, &reached, total);
        combined.counted.extend(reached.counted.iter().cloned());
    }
    line("combined", &combined, total);
    // Functions by points reached / points.
    let mut functions: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for (site, function) in &sites.counted {
        let entry = functions.entry(function).or_default();
        entry.1 += 1;
        entry.0 += usize::from(combined.counted.contains(site));
    }
    let never: Vec<_> = functions.iter().filter(|(_, (hit, _))| *hit == 0).collect();
    println!(
        "\n== functions never reached ({} of {}, {} points)",
        never.len(),
        functions.len(),
        never.iter().map(|(_, (_, n))| n).sum::<usize>()
    );
    for (function, (_, points)) in &never {
        println!("{points:>5}  {function}");
    }
    let partial: Vec<_> = functions
        .iter()
        .filter(|(_, (hit, all))| *hit > 0 && hit < all)
        .collect();
    println!("\n== functions reached in part (points reached / points)");
    for (function, (hit, all)) in partial {
        println!("{hit:>5} / {all:<5} {function}");
    }
    println!(
        "\ncoverage: {} of {total} module PCs ({:.1}%)",
        combined.counted.len(),
        percent(combined.counted.len(), total)
    );
}
