//! The slab generation as a sequence lock: how a reader knows that what it copied all belongs
//! to the owner it attached to.
//!
//! The kernel writes the generation word
//! ([`SLAB_GENERATION_OFFSET`](nds_abi::layout::SLAB_GENERATION_OFFSET); ownership and
//! generation rules in [`nds_abi::layout`]): it moves on every assignment and every release,
//! odd while a process owns the slab, and a release publishes its new value *before* zeroing
//! the slab, with a write barrier in between. A reader records the value when it attaches (its
//! *tenure*) and reads like a seqlock reader:
//!
//! 1. load the generation, then an acquire fence (an acquire load: Rust only guarantees relaxed
//!    loads on the read-only mappings readers use, so the fence supplies the ordering); if it is
//!    not the tenure's, the slab has [moved](SlabRead::Moved) and nothing is copied;
//! 2. copy with relaxed word loads;
//! 3. acquire fence, then load the generation again; the same value means the copy is
//!    [valid](SlabRead::Valid).
//!
//! If the copy saw any word the release zeroed, the kernel's barrier (generation before zeroes)
//! and the fence of step 3 make the second load see the new generation, so a copy that mixes
//! the owner's words with zeroes (or with a new owner's words) is never valid. A generation
//! that changed during the copy is retried, at most [`ATTEMPTS`] times in all: the kernel only
//! ever moves it forward, so the next attempt stops at step 1 as moved; a value that comes back
//! to the tenure's (only a process writing the word itself can do that) ends as
//! [torn](SlabRead::Torn) once the attempts are used up.
//!
//! Words are only ever compared against the tenure, never trusted: whatever a producer writes
//! into the generation word, a reader never panics and never calls data from another tenure
//! valid unless the word was forged to match.

// Under `--cfg loom` the fences are loom's, so that its model checks the protocol's orderings.
#[cfg(loom)]
use loom::sync::atomic::{fence, Ordering};
#[cfg(not(loom))]
use std::sync::atomic::{fence, Ordering};

use nds_abi::layout::slab_generation_is_owned;

/// Attempts of one guarded read before it is called torn.
pub const ATTEMPTS: usize = 4;

/// Outcome of a read guarded by the slab generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlabRead<T> {
    /// Read entirely while the slab belonged to the owner the reader attached to.
    Valid(T),
    /// The slab is no longer the attached owner's: released (even generation) or reassigned
    /// (another odd one). Nothing read from it belongs to the attached process any more.
    Moved {
        /// The generation found.
        generation: u64,
    },
    /// The generation changed during every attempt yet kept returning to the attached value:
    /// the word is being rewritten by a process, not by the kernel. Nothing read is trusted.
    Torn,
}

impl<T> SlabRead<T> {
    /// The value, if valid.
    #[must_use]
    pub fn valid(self) -> Option<T> {
        match self {
            Self::Valid(value) => Some(value),
            Self::Moved { .. } | Self::Torn => None,
        }
    }

    /// Applies `f` to a valid value.
    #[must_use]
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> SlabRead<U> {
        match self {
            Self::Valid(value) => SlabRead::Valid(f(value)),
            Self::Moved { generation } => SlabRead::Moved { generation },
            Self::Torn => SlabRead::Torn,
        }
    }
}

/// The tenure a reader attached to: the generation it saw, and whether only odd (owned)
/// generations count, which holds for the kernel's slabs and not for plain files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Tenure {
    pub(crate) generation: u64,
    pub(crate) kernel: bool,
}

impl Tenure {
    /// Whether the slab, showing `generation`, still belongs to this tenure's owner.
    ///
    /// A kernel slab found free (even) at attach time never held data of its owner again.
    pub(crate) fn holds(self, generation: u64) -> bool {
        generation == self.generation && (!self.kernel || slab_generation_is_owned(generation))
    }
}

/// Runs `copy` under the protocol of this module: `generation` is a relaxed load of the
/// generation word, `copy` does the relaxed loads of the data.
#[inline]
pub(crate) fn read_guarded(
    tenure: Tenure,
    generation: impl Fn() -> u64,
    mut copy: impl FnMut(),
) -> SlabRead<()> {
    for _ in 0..ATTEMPTS {
        let before = generation();
        fence(Ordering::Acquire);
        if !tenure.holds(before) {
            return SlabRead::Moved { generation: before };
        }
        copy();
        fence(Ordering::Acquire);
        if generation() == before {
            return SlabRead::Valid(());
        }
    }
    SlabRead::Torn
}

/// The closing check of the protocol on its own, for a caller that made several guarded reads
/// (a snapshot, then records) and wants them all covered: the acquire fence orders every load
/// made before the call ahead of the generation load. `Some(generation)` when the slab moved.
#[inline]
pub(crate) fn moved_since(tenure: Tenure, generation: impl Fn() -> u64) -> Option<u64> {
    fence(Ordering::Acquire);
    let now = generation();
    (!tenure.holds(now)).then_some(now)
}

#[cfg(all(test, loom))]
mod loom_model {
    //! The protocol under loom's model of the C11 memory model: relaxed loads may return any
    //! value their coherence order and the happens-before relation allow, so a missing fence on
    //! either side shows up as a valid read that holds a zero.
    //!
    //! The kernel's release is what `release_slot` does: the new generation, a write barrier
    //! (`smp_wmb`, a release fence here), then the zeroes.

    use loom::sync::atomic::AtomicU64;
    use loom::sync::Arc;
    use loom::thread;

    use super::*;

    const OWNER_WORD: u64 = 0x5EED;

    /// One release racing one guarded read of two words; `barrier` is whether the kernel
    /// orders the generation before the zeroes.
    fn release_during_a_read(barrier: bool) {
        loom::model(move || {
            let generation = Arc::new(AtomicU64::new(1));
            let words = Arc::new([AtomicU64::new(OWNER_WORD), AtomicU64::new(OWNER_WORD)]);
            let kernel = {
                let (generation, words) = (Arc::clone(&generation), Arc::clone(&words));
                thread::spawn(move || {
                    generation.store(2, Ordering::Relaxed);
                    if barrier {
                        fence(Ordering::Release);
                    }
                    for word in words.iter() {
                        word.store(0, Ordering::Relaxed);
                    }
                })
            };
            let mut copy = [0; 2];
            let outcome = read_guarded(
                Tenure {
                    generation: 1,
                    kernel: true,
                },
                || generation.load(Ordering::Relaxed),
                || {
                    for (value, word) in copy.iter_mut().zip(words.iter()) {
                        *value = word.load(Ordering::Relaxed);
                    }
                },
            );
            match outcome {
                SlabRead::Valid(()) => assert_eq!(copy, [OWNER_WORD; 2], "valid with zeroes"),
                SlabRead::Moved { generation } => assert_eq!(generation, 2),
                SlabRead::Torn => panic!("the kernel only moves the generation forward"),
            }
            kernel.join().unwrap();
        });
    }

    #[test]
    fn loom_a_release_during_a_read_is_never_valid_with_its_zeroes() {
        release_during_a_read(true);
    }

    #[test]
    fn loom_finds_the_mixed_read_when_the_kernel_leaves_out_its_barrier() {
        // The model is sharp enough to fail: without the write barrier the reader's fences
        // have nothing to synchronize with, and some execution is valid with a zero.
        let found = std::panic::catch_unwind(|| release_during_a_read(false)).is_err();
        assert!(found, "loom accepted a kernel without its barrier");
    }
}

#[cfg(test)]
mod model {
    //! A model of the protocol against a slab that the kernel releases and reassigns, and that
    //! processes scribble on, at any point of a read, word by word (an interleaving at the
    //! granularity of single loads, which is what the protocol has to be right about on a
    //! sequentially consistent machine; the fences are what carry it to weaker ones).
    //!
    //! The data words carry their writer: tenure `t` writes `t << 32 | value`, a release writes
    //! zeroes. A valid read must hold only words of the attached tenure.

    use std::cell::{Cell, RefCell};

    use proptest::collection::vec;
    use proptest::prelude::*;

    use super::*;

    const WORDS: usize = 6;

    /// What happens to the slab after a given number of loads by the reader.
    #[derive(Clone, Copy, Debug)]
    enum Event {
        /// The owner increments a data word (within its tenure).
        Increment(usize),
        /// The kernel releases the slab: next (even) generation, a barrier, then zeroes.
        Release,
        /// The kernel assigns the free slab to a new owner, which writes its words.
        Assign,
        /// A process writes `value` into the generation word.
        Scribble(u64),
    }

    fn event() -> impl Strategy<Value = Event> {
        prop_oneof![
            4 => (0..WORDS).prop_map(Event::Increment),
            2 => Just(Event::Release),
            1 => Just(Event::Assign),
            1 => prop_oneof![Just(1u64), Just(3), any::<u64>()].prop_map(Event::Scribble),
        ]
    }

    /// The slab and its adversary, who acts between the reader's loads.
    struct Slab {
        generation: Cell<u64>,
        words: RefCell<[u64; WORDS]>,
        /// The tenure whose words the slab holds (0 while released).
        owner: Cell<u64>,
        loads: Cell<usize>,
        schedule: Vec<(usize, Event)>,
        /// Whether the generation word was ever written by anyone but the kernel.
        forged: Cell<bool>,
    }

    impl Slab {
        fn new(schedule: Vec<(usize, Event)>) -> Self {
            let slab = Self {
                generation: Cell::new(1),
                words: RefCell::new([0; WORDS]),
                owner: Cell::new(1),
                loads: Cell::new(0),
                schedule,
                forged: Cell::new(false),
            };
            slab.fill(1);
            slab
        }

        fn fill(&self, tenure: u64) {
            for (index, word) in self.words.borrow_mut().iter_mut().enumerate() {
                *word = tenure << 32 | index as u64;
            }
        }

        /// One load by the reader: first whatever the schedule puts before it.
        fn tick(&self) {
            let now = self.loads.get();
            self.loads.set(now + 1);
            for &(at, event) in &self.schedule {
                if at == now {
                    self.apply(event);
                }
            }
        }

        fn apply(&self, event: Event) {
            match event {
                Event::Increment(index) => {
                    if self.owner.get() != 0 {
                        self.words.borrow_mut()[index] += 1;
                    }
                }
                Event::Release => {
                    if self.owner.get() != 0 {
                        // Generation first, then the zeroes (the kernel's order).
                        self.generation.set((self.generation.get() | 1) + 1);
                        self.owner.set(0);
                        *self.words.borrow_mut() = [0; WORDS];
                    }
                }
                Event::Assign => {
                    if self.owner.get() == 0 {
                        let generation = self.generation.get() + 1;
                        self.generation.set(generation | 1);
                        self.owner.set(generation | 1);
                        self.fill(generation | 1);
                    }
                }
                Event::Scribble(value) => {
                    self.forged.set(true);
                    self.generation.set(value);
                }
            }
        }

        fn load_generation(&self) -> u64 {
            self.tick();
            self.generation.get()
        }

        fn load_word(&self, index: usize) -> u64 {
            self.tick();
            self.words.borrow()[index]
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]

        /// Never valid with a word from another tenure or a zeroed one, whatever the kernel does
        /// when; moved exactly when the generation left the tenure; torn only if forged.
        #[test]
        fn a_valid_read_never_mixes_tenures(
            schedule in vec((0..40usize, event()), 0..6),
            kernel in any::<bool>(),
        ) {
            let slab = Slab::new(schedule);
            let tenure = Tenure { generation: 1, kernel };
            let mut copy = [0u64; WORDS];
            let outcome = read_guarded(tenure, || slab.load_generation(), || {
                for (index, word) in copy.iter_mut().enumerate() {
                    *word = slab.load_word(index);
                }
            });
            match outcome {
                // A process that forges the word back to the tenure's value can make anything
                // look valid; the protocol only has to be right about the kernel's generations.
                SlabRead::Valid(()) if !slab.forged.get() => {
                    for (index, word) in copy.iter().enumerate() {
                        prop_assert_eq!(word >> 32, 1, "word {} is {:#x}: not the tenure's", index, word);
                    }
                }
                SlabRead::Valid(()) => {}
                SlabRead::Moved { generation } => prop_assert!(!tenure.holds(generation)),
                SlabRead::Torn => prop_assert!(slab.forged.get(), "torn without a forged generation"),
            }
        }

        /// A read during which nothing happens to the generation is valid at the first attempt.
        #[test]
        fn an_undisturbed_read_is_valid(increments in vec((0..40usize, 0..WORDS), 0..8)) {
            let schedule = increments
                .into_iter()
                .map(|(at, index)| (at, Event::Increment(index)))
                .collect();
            let slab = Slab::new(schedule);
            let outcome = read_guarded(Tenure { generation: 1, kernel: true }, || slab.load_generation(), || {
                for index in 0..WORDS {
                    let _ = slab.load_word(index);
                }
            });
            prop_assert_eq!(outcome, SlabRead::Valid(()));
            prop_assert_eq!(slab.loads.get(), WORDS + 2);
        }
    }

    #[test]
    fn a_generation_forged_back_every_time_ends_torn_after_the_attempts() {
        // Before every copy the word shows the tenure, after it another value.
        let per_attempt = WORDS + 2;
        let schedule = (0..ATTEMPTS)
            .flat_map(|attempt| {
                let start = attempt * per_attempt;
                [
                    (start + 1, Event::Scribble(7)),
                    (start + per_attempt, Event::Scribble(1)),
                ]
            })
            .collect();
        let slab = Slab::new(schedule);
        let outcome = read_guarded(
            Tenure {
                generation: 1,
                kernel: true,
            },
            || slab.load_generation(),
            || {
                for index in 0..WORDS {
                    let _ = slab.load_word(index);
                }
            },
        );
        assert_eq!(outcome, SlabRead::Torn);
        assert_eq!(slab.loads.get(), ATTEMPTS * per_attempt);
    }

    #[test]
    fn a_kernel_slab_found_free_is_moved_even_when_the_generation_stays() {
        let tenure = Tenure {
            generation: 2,
            kernel: true,
        };
        let outcome = read_guarded(tenure, || 2, || panic!("copied a free slab"));
        assert_eq!(outcome, SlabRead::Moved { generation: 2 });
        // A plain file has no owner bit: its generation (0 in a fresh file) just has to stay.
        let file = Tenure {
            generation: 0,
            kernel: false,
        };
        assert_eq!(read_guarded(file, || 0, || {}), SlabRead::Valid(()));
        assert_eq!(moved_since(file, || 0), None);
        assert_eq!(moved_since(tenure, || 3), Some(3));
    }
}
