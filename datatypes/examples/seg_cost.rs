//! Traversal cost per segment, for instruction counting under `valgrind --tool=callgrind`:
//! `seg_cost <case> <reps>` iterates the segments of one type `reps` times.

use madmpi_datatypes::{Basic, Datatype, Order};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let case = args.get(1).map(String::as_str).unwrap_or("vector");
    let reps: usize = args.get(2).and_then(|r| r.parse().ok()).unwrap_or(1);
    let d = Datatype::basic(Basic::Double);
    let n = 1 << 16;
    let (t, count) = match case {
        "vector" => (Datatype::vector(n, 1, 2, &d).unwrap(), 1),
        "struct" => (
            Datatype::create_struct(&[1, 1], &[0, 8], &[Datatype::basic(Basic::Int), d.clone()])
                .unwrap(),
            n,
        ),
        "subarray3d" => (
            Datatype::create_subarray(&[64, 64, 64], &[32, 32, 2], &[1, 1, 1], Order::C, &d)
                .unwrap(),
            1,
        ),
        _ => (Datatype::contiguous(1, &d).unwrap(), 1),
    };
    let mut total = 0usize;
    for _ in 0..reps {
        total += t.segments(count, 0..usize::MAX).count();
    }
    let mut out = vec![0u8; t.pack_size(count).unwrap()];
    let (lo, hi) = t.buffer_span(count).unwrap();
    let src = vec![0u8; (hi - lo) as usize];
    for _ in 0..reps {
        // SAFETY: `src` covers the span (lo is 0 for these types).
        total += unsafe { t.pack(src.as_ptr(), count, 0, &mut out) };
    }
    println!("{case}: {total}");
}
