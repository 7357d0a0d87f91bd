//! Property tests: random nested datatypes (depth ≤ 4, negative displacements and strides,
//! resized bounds, subarrays, darrays) against the naive reference of `common`.

mod common;

use common::{
    map_of, naive_elements, naive_pack, naive_unpack, segments as ref_segments, Buf, Map, T,
};
use madmpi_datatypes::{Basic, Datatype, Distribution, Order};
use proptest::collection::vec;
use proptest::prelude::*;

fn leaf() -> impl Strategy<Value = Datatype> {
    prop::sample::select(vec![
        Basic::Char,
        Basic::Short,
        Basic::Int,
        Basic::Double,
        Basic::LongDouble,
        Basic::DoubleInt,
        Basic::ShortInt,
        Basic::FloatInt,
        Basic::CDoubleComplex,
        Basic::Byte,
    ])
    .prop_map(Datatype::basic)
}

fn subarray(t: Datatype, dims: Vec<(usize, usize, usize)>, c: bool) -> Datatype {
    let sizes: Vec<usize> = dims.iter().map(|d| d.0).collect();
    let subsizes: Vec<usize> = dims.iter().map(|d| d.1 % (d.0 + 1)).collect();
    let starts: Vec<usize> = dims
        .iter()
        .zip(&subsizes)
        .map(|(d, &s)| d.2 % (d.0 - s + 1))
        .collect();
    let order = if c { Order::C } else { Order::Fortran };
    Datatype::create_subarray(&sizes, &subsizes, &starts, order, &t).unwrap()
}

type DarrayDim = (usize, usize, u8, usize);

fn darray(t: Datatype, dims: Vec<DarrayDim>, rank: usize, c: bool) -> Datatype {
    // (gsize, psize, distribution, darg)
    let mut gsizes = vec![];
    let mut psizes = vec![];
    let mut distribs = vec![];
    let mut dargs = vec![];
    for (g, p, d, a) in dims {
        gsizes.push(g);
        match d % 3 {
            0 => {
                psizes.push(1);
                distribs.push(Distribution::None);
                dargs.push(None);
            }
            1 => {
                psizes.push(p);
                distribs.push(Distribution::Block);
                // a block size that covers the dimension, or the default
                dargs.push(if a == 0 {
                    None
                } else {
                    Some(g.div_ceil(p) + a - 1)
                });
            }
            _ => {
                psizes.push(p);
                distribs.push(Distribution::Cyclic);
                dargs.push(if a == 0 { None } else { Some(a) });
            }
        }
    }
    let size: usize = psizes.iter().product();
    let order = if c { Order::C } else { Order::Fortran };
    Datatype::create_darray(
        size,
        rank % size,
        &gsizes,
        &distribs,
        &dargs,
        &psizes,
        order,
        &t,
    )
    .unwrap()
}

fn arb_type() -> impl Strategy<Value = T> {
    arb_dt().prop_map(T)
}

fn arb_dt() -> impl Strategy<Value = Datatype> {
    leaf().prop_recursive(4, 32, 4, |inner| {
        let made = prop_oneof![
            (0usize..4, inner.clone()).prop_map(|(n, t)| Datatype::contiguous(n, &t).unwrap()),
            (0usize..4, 0usize..3, -3isize..4, inner.clone())
                .prop_map(|(c, b, s, t)| Datatype::vector(c, b, s, &t).unwrap()),
            (0usize..4, 0usize..3, -40isize..40, inner.clone())
                .prop_map(|(c, b, s, t)| Datatype::create_hvector(c, b, s, &t).unwrap()),
            (vec((0usize..3, -4isize..6), 0..4), inner.clone()).prop_map(|(bd, t)| {
                let (b, d): (Vec<_>, Vec<_>) = bd.into_iter().unzip();
                Datatype::indexed(&b, &d, &t).unwrap()
            }),
            (vec((0usize..3, -40isize..40), 0..4), inner.clone()).prop_map(|(bd, t)| {
                let (b, d): (Vec<_>, Vec<_>) = bd.into_iter().unzip();
                Datatype::create_hindexed(&b, &d, &t).unwrap()
            }),
            (0usize..3, vec(-4isize..6, 0..4), inner.clone())
                .prop_map(|(b, d, t)| Datatype::create_indexed_block(b, &d, &t).unwrap()),
            (0usize..3, vec(-40isize..40, 0..4), inner.clone())
                .prop_map(|(b, d, t)| Datatype::create_hindexed_block(b, &d, &t).unwrap()),
            vec((0usize..3, -40isize..40, inner.clone()), 1..4).prop_map(|v| {
                let b: Vec<usize> = v.iter().map(|x| x.0).collect();
                let d: Vec<isize> = v.iter().map(|x| x.1).collect();
                let t: Vec<Datatype> = v.into_iter().map(|x| x.2).collect();
                Datatype::create_struct(&b, &d, &t).unwrap()
            }),
            (inner.clone(), -16isize..16, -8isize..48)
                .prop_map(|(t, lb, ext)| Datatype::create_resized(&t, lb, ext).unwrap()),
            inner.clone().prop_map(|t| t.dup()),
            (
                inner.clone(),
                vec((1usize..4, 0usize..4, 0usize..4), 1..3),
                any::<bool>()
            )
                .prop_map(|(t, dims, c)| subarray(t, dims, c)),
            (
                inner,
                vec((1usize..6, 1usize..3, 0u8..3, 0usize..3), 1..3),
                0usize..8,
                any::<bool>()
            )
                .prop_map(|(t, dims, rank, c)| darray(t, dims, rank, c)),
        ];
        // the same constructors as made by the `_c` bindings, reporting large counts
        (made, any::<bool>()).prop_map(|(t, large)| if large { t.mark_large_count() } else { t })
    })
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(if cfg!(miri) { 6 } else { 400 }),
        max_global_rejects: 1_000_000,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn check_bounds(t: &Datatype, m: &Map) -> Result<(), TestCaseError> {
    prop_assert_eq!(t.size(), m.size(), "size");
    prop_assert_eq!((t.lb(), t.ub()), (m.lb, m.ub), "lb/ub");
    prop_assert_eq!(t.extent(), m.extent(), "extent");
    let (tl, tu) = m.true_bounds();
    prop_assert_eq!((t.true_lb(), t.true_ub()), (tl, tu), "true bounds");
    prop_assert_eq!(t.element_count(), m.data.len(), "elements");
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn show_samples(tt in arb_type()) {
        if std::env::var("SHOW").is_ok() { println!("{:?}", tt); }
    }

    #[test]
    fn bounds_match_reference(tt in arb_type()) {
        let t = tt.0;
        let m = map_of(&t);
        check_bounds(&t, &m)?;
        // the large-count report of the same arguments describes the same type
        let c = t.clone().dup();
        prop_assert_eq!(c.size(), t.size());
    }

    #[test]
    fn segments_match_reference(tt in arb_type(), count in 0usize..4, a in 0usize..2000, b in 0usize..2000) {
        let t = tt.0;
        let m = map_of(&t);
        let total = count * t.size();
        let (s, e) = if total == 0 { (0, 0) } else { (a % (total + 1), b % (total + 1)) };
        let (s, e) = (s.min(e), s.max(e));
        let got: Vec<_> = t.segments(count, s..e).collect();
        prop_assert_eq!(&got, &ref_segments(&m, count, s, e));
        let all: Vec<_> = t.segments(count, 0..usize::MAX).collect();
        prop_assert_eq!(&all, &ref_segments(&m, count, 0, total));
        let stats = t.block_stats(count);
        prop_assert_eq!(stats.bytes, total);
        prop_assert!(all.len() <= stats.segments);
        prop_assert!(all.iter().all(|&(_, l)| l >= stats.min_len));
        if t.is_contiguous() {
            prop_assert!(all.len() <= 1);
            if let Some(&(off, _)) = all.first() {
                prop_assert_eq!(off, t.true_lb());
            }
        }
    }

    #[test]
    fn pack_matches_reference(tt in arb_type(), count in 0usize..4, chunks in vec(1usize..40, 1..20)) {
        let t = tt.0;
        let m = map_of(&t);
        let src = Buf::new(&t, count, |i| (i * 7 + 3) as u8);
        let expected = naive_pack(&m, count, &src);
        let total = t.pack_size(count).unwrap();
        prop_assert_eq!(expected.len(), total);
        let mut whole = vec![0u8; total];
        // SAFETY: `src` covers the buffer span of `count` elements.
        let n = unsafe { t.pack(src.ptr(), count, 0, &mut whole) };
        prop_assert_eq!(n, total);
        prop_assert_eq!(&whole, &expected);
        // in pieces, at arbitrary offsets
        let mut pieces = vec![];
        let mut off = 0;
        let mut i = 0;
        while off < total {
            let mut chunk = vec![0u8; chunks[i % chunks.len()]];
            // SAFETY: as above.
            let n = unsafe { t.pack(src.ptr(), count, off, &mut chunk) };
            prop_assert!(n > 0);
            pieces.extend_from_slice(&chunk[..n]);
            off += n;
            i += 1;
        }
        prop_assert_eq!(&pieces, &expected);
        // past the end
        let mut extra = [0u8; 4];
        // SAFETY: as above.
        prop_assert_eq!(unsafe { t.pack(src.ptr(), count, total, &mut extra) }, 0);
    }

    #[test]
    fn unpack_matches_reference(tt in arb_type(), count in 0usize..4, chunks in vec(1usize..40, 1..20)) {
        let t = tt.0;
        let m = map_of(&t);
        let total = t.pack_size(count).unwrap();
        let stream: Vec<u8> = (0..total).map(|i| (i * 13 + 5) as u8).collect();
        let mut expected = Buf::new(&t, count, |_| 0xAA);
        naive_unpack(&m, count, &stream, &mut expected);
        let mut got = Buf::new(&t, count, |_| 0xAA);
        // SAFETY: `got` covers the buffer span of `count` elements.
        let n = unsafe { t.unpack(got.mut_ptr(), count, 0, &stream) };
        prop_assert_eq!(n, total);
        prop_assert_eq!(&got.bytes, &expected.bytes);
        let mut pieces = Buf::new(&t, count, |_| 0xAA);
        let mut off = 0;
        let mut i = 0;
        while off < total {
            let len = chunks[i % chunks.len()].min(total - off);
            // SAFETY: as above.
            let n = unsafe { t.unpack(pieces.mut_ptr(), count, off, &stream[off..off + len]) };
            prop_assert_eq!(n, len);
            off += n;
            i += 1;
        }
        prop_assert_eq!(&pieces.bytes, &expected.bytes);
    }

    #[test]
    fn elements_match_reference(tt in arb_type()) {
        let t = tt.0;
        let m = map_of(&t);
        for bytes in 0..=(2 * t.size()).min(600) {
            prop_assert_eq!(t.elements_in(bytes), naive_elements(&m, bytes), "bytes = {}", bytes);
        }
    }

    #[test]
    fn signature_of_flattened_type_matches(tt in arb_type(), count in 1usize..3) {
        let t = tt.0;
        let m = map_of(&t);
        // a struct of the basic elements at packed positions has the same signature
        let mut disp = 0isize;
        let mut d = vec![];
        let mut ts = vec![];
        for &(_, b) in &m.data {
            d.push(disp);
            ts.push(Datatype::basic(b));
            disp += b.size() as isize;
        }
        let flat = Datatype::create_struct(&vec![1; ts.len()], &d, &ts).unwrap();
        prop_assert!(t.signature_matches_prefix(count, &flat, count));
        prop_assert!(flat.signature_matches_prefix(count, &t, count));
        prop_assert!(t.signature_matches_prefix(count, &t, count + 1));
        if t.size() > 0 {
            prop_assert!(!t.signature_matches_prefix(count + 1, &t, count));
        }
    }

    #[test]
    fn external32_round_trip(tt in arb_type(), count in 0usize..3) {
        let t = tt.0;
        let m = map_of(&t);
        prop_assume!(m.data.iter().all(|(_, b)| *b != Basic::LongDouble));
        let src = Buf::new(&t, count, |i| (i * 31 + 7) as u8);
        let size = t.pack_external_size(count).unwrap();
        let mut ext = vec![0u8; size + 3];
        let mut pos = 3;
        // SAFETY: `src` covers the buffer span.
        unsafe { t.pack_external(src.ptr(), count, &mut ext, &mut pos) }.unwrap();
        prop_assert_eq!(pos, size + 3);
        // reference: every unit of every element reversed
        let mut expected = vec![];
        for (off, len, b) in common::elements(&m, count) {
            let unit = match b {
                Basic::Char | Basic::Byte => 1,
                Basic::CDoubleComplex => 8,
                _ => len,
            };
            let i = src.at(off);
            for u in src.bytes[i..i + len].chunks(unit) {
                expected.extend(u.iter().rev());
            }
        }
        prop_assert_eq!(&ext[3..], &expected[..]);
        let mut back = Buf::new(&t, count, |_| 0);
        let mut pos = 3;
        // SAFETY: `back` covers the buffer span.
        unsafe { t.unpack_external(&ext, &mut pos, back.mut_ptr(), count) }.unwrap();
        prop_assert_eq!(naive_pack(&m, count, &back), naive_pack(&m, count, &src));
    }
}
