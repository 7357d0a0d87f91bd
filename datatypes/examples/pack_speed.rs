//! Pack throughput of contiguous and strided types, next to `memcpy`.
//! `cargo run --release -p madmpi-datatypes --example pack_speed`

use std::time::Instant;

use madmpi_datatypes::{Basic, Datatype};

fn gbps(bytes: usize, reps: usize, t: f64) -> f64 {
    (bytes * reps) as f64 / t / 1e9
}

fn main() {
    let d = Datatype::basic(Basic::Double);
    let n = 1 << 20; // doubles packed per call (8 MB)
    let src = vec![1u8; 2 * n * 8 + 4096];
    let mut out = vec![0u8; n * 8];
    let reps = 50;

    let t0 = Instant::now();
    for _ in 0..reps {
        out.copy_from_slice(&src[..n * 8]);
        std::hint::black_box(&mut out);
    }
    println!(
        "memcpy                      {:6.2} GB/s",
        gbps(n * 8, reps, t0.elapsed().as_secs_f64())
    );

    let cases = [
        (
            "contiguous(n, double)",
            Datatype::contiguous(n, &d).unwrap(),
            1,
        ),
        (
            "vector(n, 1, 2, double)",
            Datatype::vector(n, 1, 2, &d).unwrap(),
            1,
        ),
        (
            "vector(n/8, 8, 16, double)",
            Datatype::vector(n / 8, 8, 16, &d).unwrap(),
            1,
        ),
        (
            "vector(n/512, 512, 1024)",
            Datatype::vector(n / 512, 512, 1024, &d).unwrap(),
            1,
        ),
        (
            "resized(double, 16) x n",
            Datatype::create_resized(&d, 0, 16).unwrap(),
            n,
        ),
        (
            "struct{int,double} x n/2",
            Datatype::create_struct(&[1, 1], &[0, 8], &[Datatype::basic(Basic::Int), d.clone()])
                .unwrap(),
            n * 8 / 12,
        ),
    ];
    for (name, t, count) in cases {
        let bytes = t.pack_size(count).unwrap().min(out.len());
        let t0 = Instant::now();
        for _ in 0..reps {
            // SAFETY: `src` covers the span of every case (at most 2n doubles + slack).
            let k = unsafe { t.pack(src.as_ptr(), count, 0, &mut out[..bytes]) };
            assert_eq!(k, bytes);
            std::hint::black_box(&mut out);
        }
        let dt = t0.elapsed().as_secs_f64();
        println!("pack {name:26} {:6.2} GB/s", gbps(bytes, reps, dt));
        let t0 = Instant::now();
        let segs = t.segments(count, 0..bytes).count();
        let dt = t0.elapsed().as_secs_f64();
        println!(
            "     segments: {segs} in {:.2} ms ({:.1} ns/segment)",
            dt * 1e3,
            dt * 1e9 / segs as f64
        );
    }
}
