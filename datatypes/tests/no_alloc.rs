//! Pack, unpack and traversal allocate nothing (checked with a counting allocator).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use madmpi_datatypes::{Basic, Datatype};

struct Counting;

static ALLOCS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator, only counting calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn pack_unpack_and_segments_do_not_allocate() {
    let d = Datatype::basic(Basic::Double);
    let types = vec![
        Datatype::contiguous(100, &d).unwrap(),
        Datatype::vector(50, 1, 2, &d).unwrap(),
        Datatype::vector(10, 3, 5, &d).unwrap(),
        Datatype::create_resized(&Datatype::vector(4, 1, 3, &d).unwrap(), 0, 8).unwrap(),
        Datatype::create_struct(
            &[1, 2, 1],
            &[0, 16, 48],
            &[
                Datatype::basic(Basic::Int),
                Datatype::vector(3, 1, 2, &d).unwrap(),
                Datatype::basic(Basic::ShortInt),
            ],
        )
        .unwrap(),
        Datatype::create_subarray(
            &[6, 7, 8],
            &[2, 3, 4],
            &[1, 2, 3],
            madmpi_datatypes::Order::C,
            &d,
        )
        .unwrap(),
    ];
    let mut src = vec![0u8; 1 << 16];
    let mut out = vec![0u8; 1 << 14];
    for t in &types {
        let count = 3;
        let (lo, hi) = t.buffer_span(count).unwrap();
        assert!(lo >= 0 && (hi as usize) <= src.len());
        let n = t.pack_size(count).unwrap();
        let before = ALLOCS.load(Ordering::Relaxed);
        // SAFETY: `src` covers the buffer span (checked above).
        unsafe {
            assert_eq!(t.pack(src.as_ptr(), count, 0, &mut out[..n]), n);
            assert_eq!(t.pack(src.as_ptr(), count, 5, &mut out[..7]), 7);
            assert_eq!(t.unpack(src.as_mut_ptr(), count, 3, &out[..n - 3]), n - 3);
        }
        let segs = t.segments(count, 1..n - 1).count();
        let stats = t.block_stats(count);
        assert_eq!(ALLOCS.load(Ordering::Relaxed), before, "{t:?}");
        assert!(segs >= 1 && stats.segments >= 1);
    }
}
