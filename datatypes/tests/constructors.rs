//! Hand-computed sizes, bounds and layouts for every constructor, the examples of the MPI
//! standard, envelope/contents, error cases and external32 bytes.

mod common;

use madmpi_datatypes::{
    abi, count_from_i64, Basic, BlockStats, Combiner, Datatype, Distribution, Error, Order,
    TypeClass,
};

fn b(x: Basic) -> Datatype {
    Datatype::basic(x)
}

/// (size, lb, extent, true_lb, true_extent)
fn dims(t: &Datatype) -> (usize, isize, isize, isize, isize) {
    (t.size(), t.lb(), t.extent(), t.true_lb(), t.true_extent())
}

fn segs(t: &Datatype, count: usize) -> Vec<(isize, usize)> {
    t.segments(count, 0..usize::MAX).collect()
}

#[test]
fn predefined() {
    let int = b(Basic::Int);
    assert_eq!(dims(&int), (4, 0, 4, 0, 4));
    assert!(int.is_committed() && int.is_contiguous() && int.is_predefined());
    assert_eq!(int.name(), "MPI_INT");
    assert_eq!(int.combiner(), Combiner::Named);
    assert!(matches!(int.contents(), Err(Error::Type(_))));
    assert_eq!(int.envelope().num_integers, 0);
    // pair types: the C struct layout
    let di = b(Basic::DoubleInt);
    assert_eq!(dims(&di), (12, 0, 16, 0, 12));
    assert!(!di.is_contiguous());
    assert_eq!(di.contiguous_span(1), Some((0, 12)));
    assert_eq!(di.contiguous_span(2), None);
    assert_eq!(segs(&di, 2), vec![(0, 12), (16, 12)]);
    let si = b(Basic::ShortInt);
    assert_eq!(dims(&si), (6, 0, 8, 0, 8));
    assert_eq!(segs(&si, 2), vec![(0, 2), (4, 6), (12, 4)]);
    assert_eq!(dims(&b(Basic::LongDoubleInt)), (20, 0, 32, 0, 20));
    // pair types are two elements (a {double, int, double} stream is 3 elements)
    assert_eq!(di.elements_in(12), Some(2));
    assert_eq!(di.elements_in(8), Some(1));
    assert_eq!(di.elements_in(20), Some(3));
    assert_eq!(di.elements_in(10), None);
    // every call returns the same object
    assert!(Datatype::basic(Basic::Int).ptr_eq(&int));
}

#[test]
fn contiguous() {
    let t = Datatype::contiguous(3, &b(Basic::Double)).unwrap();
    assert_eq!(dims(&t), (24, 0, 24, 0, 24));
    assert!(t.is_contiguous());
    assert_eq!(segs(&t, 2), vec![(0, 48)]);
    let z = Datatype::contiguous(0, &b(Basic::Double)).unwrap();
    assert_eq!(dims(&z), (0, 0, 0, 0, 0));
    assert_eq!(segs(&z, 5), vec![]);
    // contiguous of a pair type keeps the gaps
    let t = Datatype::contiguous(2, &b(Basic::DoubleInt)).unwrap();
    assert_eq!(dims(&t), (24, 0, 32, 0, 28));
    assert_eq!(segs(&t, 1), vec![(0, 12), (16, 12)]);
}

#[test]
fn vector_and_hvector() {
    let int = b(Basic::Int);
    let v = Datatype::vector(3, 2, 4, &int).unwrap();
    assert_eq!(dims(&v), (24, 0, 40, 0, 40));
    assert_eq!(segs(&v, 1), vec![(0, 8), (16, 8), (32, 8)]);
    assert_eq!(
        segs(&v, 2),
        vec![(0, 8), (16, 8), (32, 16), (56, 8), (72, 8)]
    );
    // any byte range of the stream
    let part: Vec<_> = v.segments(1, 4..20).collect();
    assert_eq!(part, vec![(4, 4), (16, 8), (32, 4)]);
    assert_eq!(
        v.block_stats(2),
        BlockStats {
            segments: 6,
            min_len: 8,
            max_len: 8,
            bytes: 48
        }
    );
    // negative stride: blocks go down
    let n = Datatype::vector(3, 1, -2, &int).unwrap();
    assert_eq!(dims(&n), (12, -16, 20, -16, 20));
    assert_eq!(segs(&n, 1), vec![(0, 4), (-8, 4), (-16, 4)]);
    // a stride equal to the block is contiguous
    let c = Datatype::vector(4, 2, 2, &int).unwrap();
    assert!(c.is_contiguous());
    // hvector of a type with a gap
    let h = Datatype::create_hvector(2, 1, 12, &b(Basic::DoubleInt)).unwrap();
    assert_eq!(dims(&h), (24, 0, 28, 0, 24));
    assert_eq!(segs(&h, 1), vec![(0, 24)]);
}

#[test]
fn indexed_family() {
    let int = b(Basic::Int);
    let t = Datatype::indexed(&[3, 1], &[4, 0], &int).unwrap();
    assert_eq!(dims(&t), (16, 0, 28, 0, 28));
    assert_eq!(segs(&t, 1), vec![(16, 12), (0, 4)]);
    let t = Datatype::create_hindexed(&[1, 2], &[-8, 10], &int).unwrap();
    assert_eq!(dims(&t), (12, -8, 26, -8, 26));
    assert_eq!(segs(&t, 1), vec![(-8, 4), (10, 8)]);
    let t = Datatype::create_indexed_block(2, &[0, 5, 3], &int).unwrap();
    assert_eq!(dims(&t), (24, 0, 28, 0, 28));
    assert_eq!(segs(&t, 1), vec![(0, 8), (20, 8), (12, 8)]);
    let t = Datatype::create_hindexed_block(1, &[8, 0, 4], &int).unwrap();
    assert_eq!(dims(&t), (12, 0, 12, 0, 12));
    // touching blocks in order merge into one segment
    assert_eq!(segs(&t, 1), vec![(8, 4), (0, 8)]);
    let t = Datatype::create_hindexed_block(1, &[0, 4, 8], &int).unwrap();
    assert!(t.is_contiguous());
    // zero-length blocks contribute nothing, not even bounds
    let t = Datatype::indexed(&[0, 1], &[-100, 2], &int).unwrap();
    assert_eq!(dims(&t), (4, 8, 4, 8, 4));
}

#[test]
fn struct_padding() {
    let (c, d, i) = (b(Basic::Char), b(Basic::Double), b(Basic::Int));
    // {double, char}: padded to the alignment of double
    let t = Datatype::create_struct(&[1, 1], &[0, 8], &[d.clone(), c.clone()]).unwrap();
    assert_eq!(dims(&t), (9, 0, 16, 0, 9));
    let t2 = Datatype::create_struct(&[1, 1], &[0, 4], &[i.clone(), c.clone()]).unwrap();
    assert_eq!(dims(&t2), (5, 0, 8, 0, 5));
    // the standard's example: {2 float at 0, type1 at 16, 3 char at 26}
    let f = b(Basic::Float);
    let s = Datatype::create_struct(&[2, 1, 3], &[0, 16, 26], &[f, t.clone(), c.clone()]).unwrap();
    assert_eq!(dims(&s), (8 + 9 + 3, 0, 32, 0, 29));
    assert_eq!(segs(&s, 1), vec![(0, 8), (16, 9), (26, 3)]);
    // chars only: no padding
    let t3 = Datatype::create_struct(&[3], &[1], &[c]).unwrap();
    assert_eq!(dims(&t3), (3, 1, 3, 1, 3));
    // empty struct
    let e = Datatype::create_struct(&[], &[], &[]).unwrap();
    assert_eq!(dims(&e), (0, 0, 0, 0, 0));
}

#[test]
fn resized_markers() {
    let int = b(Basic::Int);
    let r = Datatype::create_resized(&int, -4, 16).unwrap();
    assert_eq!(dims(&r), (4, -4, 16, 0, 4));
    assert_eq!(r.ub(), 12);
    let c = Datatype::contiguous(2, &r).unwrap();
    assert_eq!(dims(&c), (8, -4, 32, 0, 20));
    assert_eq!(segs(&c, 1), vec![(0, 4), (16, 4)]);
    // markers win over natural bounds, even when data lies outside them
    let d = b(Basic::Double);
    let s = Datatype::create_struct(&[1, 1], &[0, 100], &[r.clone(), d]).unwrap();
    assert_eq!((s.lb(), s.ub()), (-4, 12));
    assert_eq!((s.true_lb(), s.true_ub()), (0, 108));
    // no padding when an upper-bound marker fixes the extent
    let r5 = Datatype::create_resized(&b(Basic::Double), 0, 5).unwrap();
    let s = Datatype::create_struct(&[1], &[0], &[r5]).unwrap();
    assert_eq!(s.extent(), 5);
    // resizing away the trailing gap of a pair type makes it contiguous
    let r = Datatype::create_resized(&b(Basic::DoubleInt), 0, 12).unwrap();
    assert!(r.is_contiguous());
    assert_eq!(segs(&r, 3), vec![(0, 36)]);
    // negative extent
    let n = Datatype::create_resized(&int, 0, -8).unwrap();
    assert_eq!(segs(&n, 3), vec![(0, 4), (-8, 4), (-16, 4)]);
    assert_eq!(n.buffer_span(3).unwrap(), (-16, 4));
    // an empty type keeps its markers
    let e = Datatype::create_resized(&Datatype::contiguous(0, &int).unwrap(), 0, 8).unwrap();
    let c = Datatype::contiguous(3, &e).unwrap();
    assert_eq!(dims(&c), (0, 0, 24, 0, 0));
}

#[test]
fn dup_and_refcounting() {
    let v = Datatype::vector(2, 1, 3, &b(Basic::Int)).unwrap();
    assert!(!v.is_committed());
    let h = v.clone();
    h.commit();
    assert!(v.is_committed());
    h.set_name("my vector");
    assert_eq!(v.name(), "my vector");
    let d = v.dup();
    assert!(d.is_committed());
    assert_eq!(d.name(), "");
    assert_eq!(dims(&d), dims(&v));
    assert_eq!(d.combiner(), Combiner::Dup);
    // "freeing" the original handle: the dup keeps it alive
    drop(v);
    drop(h);
    let inner = d.contents().unwrap().datatypes.remove(0);
    assert_eq!(inner.combiner(), Combiner::Vector);
    assert_eq!(inner.name(), "my vector");
    let d2 = b(Basic::Int).dup();
    assert!(d2.is_committed() && !d2.is_predefined());
}

#[test]
fn subarray_examples() {
    let f = b(Basic::Float);
    // a 100x100 C array, the 50x50 upper-right block
    let t = Datatype::create_subarray(&[100, 100], &[50, 50], &[0, 50], Order::C, &f).unwrap();
    assert_eq!(t.size(), 2500 * 4);
    assert_eq!((t.lb(), t.extent()), (0, 40000));
    assert_eq!((t.true_lb(), t.true_ub()), (200, 20000));
    let s = segs(&t, 1);
    assert_eq!(s.len(), 50);
    assert_eq!(s[0], (200, 200));
    assert_eq!(s[49], (200 + 49 * 400, 200));
    // the same block in Fortran order (first index fastest)
    let t =
        Datatype::create_subarray(&[100, 100], &[50, 50], &[50, 0], Order::Fortran, &f).unwrap();
    assert_eq!(segs(&t, 1)[..2], [(200, 200), (600, 200)]);
    // 3-D, contents
    let t = Datatype::create_subarray(&[4, 5, 6], &[2, 3, 4], &[1, 1, 1], Order::C, &f).unwrap();
    assert_eq!(t.size(), 24 * 4);
    assert_eq!(t.extent(), 120 * 4);
    assert_eq!(t.true_lb(), (30 + 6 + 1) * 4);
    let c = t.contents().unwrap();
    assert_eq!(c.integers, vec![3, 4, 5, 6, 2, 3, 4, 1, 1, 1, abi::ORDER_C]);
    // full array = contiguous
    let t = Datatype::create_subarray(&[3, 4], &[3, 4], &[0, 0], Order::C, &f).unwrap();
    assert!(t.is_contiguous());
    // errors
    let e = Datatype::create_subarray(&[4], &[3], &[2], Order::C, &f);
    assert!(matches!(e, Err(Error::Arg(_))));
    let e = Datatype::create_subarray(&[], &[], &[], Order::C, &f);
    assert!(matches!(e, Err(Error::Arg(_))));
    let e = Datatype::create_subarray(&[4, 4], &[3], &[0, 0], Order::C, &f);
    assert!(matches!(e, Err(Error::Arg(_))));
}

#[test]
fn darray_examples() {
    let f = b(Basic::Float);
    use Distribution::{Block, Cyclic};
    // 10x9 array, BLOCK x BLOCK over a 2x3 grid, rank 4 = coords (1, 1): rows 5..10, cols 3..6
    let t = Datatype::create_darray(
        6,
        4,
        &[10, 9],
        &[Block, Block],
        &[None, None],
        &[2, 3],
        Order::C,
        &f,
    )
    .unwrap();
    assert_eq!(t.size(), 5 * 3 * 4);
    assert_eq!((t.lb(), t.extent()), (0, 360));
    assert_eq!(
        (t.true_lb(), t.true_ub()),
        ((5 * 9 + 3) * 4, (9 * 9 + 6) * 4)
    );
    assert_eq!(segs(&t, 1)[0], (192, 12));
    let c = t.contents().unwrap();
    assert_eq!(
        c.integers,
        vec![
            6,
            4,
            2,
            10,
            9,
            abi::DISTRIBUTE_BLOCK,
            abi::DISTRIBUTE_BLOCK,
            abi::DISTRIBUTE_DFLT_DARG,
            abi::DISTRIBUTE_DFLT_DARG,
            2,
            3,
            abi::ORDER_C
        ]
    );
    // CYCLIC(2) over 3 processes: rank 1 owns elements 2,3 and 8,9 of 10
    let t =
        Datatype::create_darray(3, 1, &[10], &[Cyclic], &[Some(2)], &[3], Order::C, &f).unwrap();
    assert_eq!(segs(&t, 1), vec![(8, 8), (32, 8)]);
    assert_eq!(t.extent(), 40);
    // the last block is short: of 11 elements, rank 2 owns 4,5 and 10
    let t =
        Datatype::create_darray(3, 2, &[11], &[Cyclic], &[Some(2)], &[3], Order::C, &f).unwrap();
    assert_eq!(segs(&t, 1), vec![(16, 8), (40, 4)]);
    // a process that owns nothing
    let t = Datatype::create_darray(4, 3, &[3], &[Block], &[None], &[4], Order::C, &f).unwrap();
    assert_eq!((t.size(), t.extent()), (0, 12));
    // Fortran order, default cyclic(1), NONE
    let t = Datatype::create_darray(
        2,
        1,
        &[4, 3],
        &[Cyclic, Distribution::None],
        &[None, None],
        &[2, 1],
        Order::Fortran,
        &f,
    )
    .unwrap();
    // elements (1,j) and (3,j): column-major offsets 1,3 then 5,7 then 9,11
    assert_eq!(
        segs(&t, 1),
        vec![(4, 4), (12, 4), (20, 4), (28, 4), (36, 4), (44, 4)]
    );
    // errors
    let e = Datatype::create_darray(5, 0, &[10], &[Block], &[None], &[4], Order::C, &f);
    assert!(matches!(e, Err(Error::Arg(_))));
    let e = Datatype::create_darray(4, 4, &[10], &[Block], &[None], &[4], Order::C, &f);
    assert!(matches!(e, Err(Error::Arg(_))));
    let e = Datatype::create_darray(4, 0, &[10], &[Block], &[Some(2)], &[4], Order::C, &f);
    assert!(matches!(e, Err(Error::Arg(_))), "2 x 4 < 10");
    let e = Datatype::create_darray(
        2,
        0,
        &[10],
        &[Distribution::None],
        &[None],
        &[2],
        Order::C,
        &f,
    );
    assert!(matches!(e, Err(Error::Arg(_))));
}

#[test]
fn envelope_and_contents() {
    let int = b(Basic::Int);
    let v = Datatype::vector(3, 2, 4, &int).unwrap();
    let e = v.envelope();
    assert_eq!(
        (
            e.num_integers,
            e.num_addresses,
            e.num_large_counts,
            e.num_datatypes,
            e.combiner
        ),
        (3, 0, 0, 1, Combiner::Vector)
    );
    let c = v.contents().unwrap();
    assert_eq!(c.integers, vec![3, 2, 4]);
    assert!(c.datatypes[0].ptr_eq(&int));
    // the _c constructors report large counts
    let v = Datatype::vector(3, 2, 4, &int).unwrap().mark_large_count();
    let c = v.contents().unwrap();
    assert_eq!(
        (c.integers.len(), c.large_counts.clone()),
        (0, vec![3, 2, 4])
    );
    let h = Datatype::create_hvector(3, 2, -24, &int).unwrap();
    let c = h.contents().unwrap();
    assert_eq!((c.integers, c.addresses), (vec![3, 2], vec![-24]));
    let h = Datatype::create_hindexed(&[3, 1], &[16, 0], &int).unwrap();
    let c = h.contents().unwrap();
    assert_eq!((c.integers, c.addresses), (vec![2, 3, 1], vec![16, 0]));
    let h = Datatype::create_hindexed(&[3, 1], &[16, 0], &int)
        .unwrap()
        .mark_large_count();
    assert_eq!(h.contents().unwrap().large_counts, vec![2, 3, 1, 16, 0]);
    let t = Datatype::indexed(&[3, 1], &[4, 0], &int).unwrap();
    assert_eq!(t.contents().unwrap().integers, vec![2, 3, 1, 4, 0]);
    let t = Datatype::create_indexed_block(2, &[0, 5], &int).unwrap();
    assert_eq!(t.contents().unwrap().integers, vec![2, 2, 0, 5]);
    let t = Datatype::create_hindexed_block(2, &[0, 5], &int).unwrap();
    let c = t.contents().unwrap();
    assert_eq!((c.integers, c.addresses), (vec![2, 2], vec![0, 5]));
    let s = Datatype::create_struct(&[1, 2], &[0, 8], &[int.clone(), b(Basic::Double)]).unwrap();
    let e = s.envelope();
    assert_eq!(
        (e.num_integers, e.num_addresses, e.num_datatypes, e.combiner),
        (3, 2, 2, Combiner::Struct)
    );
    let r = Datatype::create_resized(&int, -4, 16).unwrap();
    assert_eq!(r.contents().unwrap().addresses, vec![-4, 16]);
    let c = Datatype::contiguous(7, &int).unwrap();
    assert_eq!(c.contents().unwrap().integers, vec![7]);
    // arguments beyond a C int are reported as large counts
    let big = Datatype::contiguous(1 << 40, &b(Basic::Byte)).unwrap();
    let c = big.contents().unwrap();
    assert_eq!(
        (c.integers.len(), c.large_counts.clone()),
        (0, vec![1 << 40])
    );
    // large-count subarray: sizes in large counts, ndims and order in integers
    let t = Datatype::create_subarray(&[4, 5], &[2, 3], &[1, 1], Order::Fortran, &int)
        .unwrap()
        .mark_large_count();
    let c = t.contents().unwrap();
    assert_eq!(c.integers, vec![2, abi::ORDER_FORTRAN]);
    assert_eq!(c.large_counts, vec![4, 5, 2, 3, 1, 1]);
    // short arrays
    let e = s.get_contents(3, 1, 0, 2);
    assert!(matches!(
        e,
        Err(Error::Truncate {
            needed: 2,
            available: 1,
            ..
        })
    ));
    assert!(s.get_contents(3, 2, 0, 2).is_ok());
    let e = s.get_contents(3, 2, 0, 1);
    assert!(matches!(
        e,
        Err(Error::Truncate {
            what: "array_of_datatypes",
            ..
        })
    ));
    // marking a predefined type changes nothing
    let _ = b(Basic::Int).mark_large_count();
    assert_eq!(
        Datatype::contiguous(2, &int)
            .unwrap()
            .envelope()
            .num_large_counts,
        0
    );
}

#[test]
fn f90_value_index_match_size() {
    let r = Datatype::create_f90_real(Some(6), None).unwrap();
    assert_eq!((r.size(), r.combiner()), (4, Combiner::F90Real));
    assert_eq!(r.contents().unwrap().integers, vec![6, abi::UNDEFINED]);
    assert!(r.is_committed() && r.is_predefined());
    let r = Datatype::create_f90_real(Some(15), Some(300)).unwrap();
    assert_eq!(r.size(), 8);
    assert!(Datatype::create_f90_real(Some(40), None).is_err());
    let c = Datatype::create_f90_complex(Some(15), None).unwrap();
    assert_eq!((c.size(), c.combiner()), (16, Combiner::F90Complex));
    let i = Datatype::create_f90_integer(Some(10)).unwrap();
    assert_eq!((i.size(), i.contents().unwrap().integers), (8, vec![10]));
    // value_index
    let p = Datatype::value_index(&b(Basic::Double), &b(Basic::Int)).unwrap();
    assert_eq!(p.as_basic(), Some(Basic::DoubleInt));
    let p = Datatype::value_index(&b(Basic::Short), &b(Basic::Long)).unwrap();
    assert_eq!(p.combiner(), Combiner::ValueIndex);
    assert_eq!(dims(&p), (10, 0, 16, 0, 16));
    assert_eq!(p.contents().unwrap().datatypes.len(), 2);
    // match_size
    let m = Datatype::match_size(TypeClass::Real, 8).unwrap();
    assert_eq!(m.as_basic(), Some(Basic::Real8));
    assert!(Datatype::match_size(TypeClass::Integer, 3).is_err());
}

#[test]
fn errors_never_panic() {
    let int = b(Basic::Int);
    let big = Datatype::contiguous(usize::MAX / 2, &int);
    assert!(matches!(big, Err(Error::ValueTooLarge(_))));
    assert!(Datatype::vector(2, 1, isize::MAX, &int).is_err());
    assert!(Datatype::create_hvector(3, 1, isize::MAX / 2, &int).is_err());
    assert!(Datatype::create_hindexed(&[1, 1], &[isize::MAX - 1, 0], &int).is_err());
    assert!(Datatype::create_resized(&int, isize::MAX, 1).is_err());
    assert!(matches!(
        Datatype::create_hindexed(&[1, 1], &[0], &int),
        Err(Error::Arg(_))
    ));
    assert!(matches!(
        Datatype::create_struct(&[1], &[0], &[]),
        Err(Error::Arg(_))
    ));
    assert!(matches!(count_from_i64(-1, "count"), Err(Error::Count(_))));
    assert_eq!(count_from_i64(5, "count"), Ok(5));
    let huge = Datatype::contiguous(1 << 40, &b(Basic::Byte)).unwrap();
    assert!(huge.pack_size(1 << 30).is_err());
    assert!(huge.buffer_span(1 << 30).is_err());
    assert!(madmpi_datatypes::check_datarep("native").is_err());
    assert!(madmpi_datatypes::check_datarep("external32").is_ok());
}

#[test]
fn large_counts_without_flattening() {
    let byte = b(Basic::Byte);
    let t = Datatype::contiguous(1 << 40, &byte).unwrap();
    assert_eq!(t.size(), 1 << 40);
    assert_eq!(segs(&t, 1), vec![(0, 1 << 40)]);
    // 2^32 strided ints: only the requested range is visited
    let v = Datatype::vector(1 << 32, 1, 2, &b(Basic::Int)).unwrap();
    assert_eq!(v.size(), 1 << 34);
    let s: Vec<_> = v.segments(1, (1 << 33) + 2..(1 << 33) + 14).collect();
    let blk = (1isize << 31) * 8;
    assert_eq!(
        s,
        vec![(blk + 2, 2), (blk + 8, 4), (blk + 16, 4), (blk + 24, 2)]
    );
    assert_eq!(v.elements_in(1 << 34), Some(1 << 32));
    assert_eq!(v.elements_in((1 << 34) + 2), None);
    assert_eq!(v.block_stats(3).segments, 3 << 32);
    // nested: {int at 0, double at 8} (size 12, extent 16), 2^35 of them; stream bytes 4..20
    // of element k = 2^34 are its double, the next int (touching: merged), half the next double
    let s = Datatype::create_struct(&[1, 1], &[0, 8], &[b(Basic::Int), b(Basic::Double)]).unwrap();
    let v = Datatype::contiguous(1 << 35, &s).unwrap();
    let got: Vec<_> = v.segments(1, (12 << 34) + 4..(12 << 34) + 20).collect();
    let k = 16isize << 34;
    assert_eq!(got, vec![(k + 8, 12), (k + 24, 4)]);
}

#[test]
fn signatures() {
    let int = b(Basic::Int);
    let v = Datatype::vector(2, 1, 2, &int).unwrap();
    let c = Datatype::contiguous(2, &int).unwrap();
    assert!(v.signature_matches_prefix(1, &c, 1));
    assert!(v.signature_matches_prefix(1, &int, 2));
    assert!(v.signature_matches_prefix(1, &int, 5));
    assert!(!v.signature_matches_prefix(1, &int, 1));
    assert!(!int.signature_matches_prefix(1, &b(Basic::Float), 1));
    let s = Datatype::create_struct(&[1, 1], &[0, 8], &[b(Basic::Double), int.clone()]).unwrap();
    assert!(b(Basic::DoubleInt).signature_matches_prefix(3, &s, 3));
    assert!(!s.signature_matches_prefix(1, &b(Basic::Double), 2));
    // MPI_PACKED matches anything of the right size
    assert!(s.signature_matches_prefix(1, &b(Basic::Packed), 12));
    assert!(!s.signature_matches_prefix(1, &b(Basic::Packed), 11));
}

#[test]
fn pack_unpack_checked() {
    let v = Datatype::vector(3, 1, 2, &b(Basic::Int)).unwrap();
    let src: Vec<i32> = (0..6).collect();
    let mut out = vec![0u8; 16];
    let mut pos = 4;
    // SAFETY: `src` holds the 5 ints the vector spans.
    unsafe { v.pack_checked(src.as_ptr().cast(), 1, &mut out, &mut pos) }.unwrap();
    assert_eq!(pos, 16);
    let ints: Vec<i32> = out[4..]
        .chunks(4)
        .map(|c| i32::from_ne_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(ints, vec![0, 2, 4]);
    let mut pos = 5;
    // SAFETY: as above.
    let e = unsafe { v.pack_checked(src.as_ptr().cast(), 1, &mut out, &mut pos) };
    assert!(matches!(
        e,
        Err(Error::Truncate {
            needed: 12,
            available: 11,
            ..
        })
    ));
    assert_eq!(pos, 5);
    let mut dst = vec![-1i32; 6];
    let mut pos = 4;
    // SAFETY: `dst` holds the 5 ints the vector spans.
    unsafe { v.unpack_checked(&out, &mut pos, dst.as_mut_ptr().cast(), 1) }.unwrap();
    assert_eq!((pos, dst), (16, vec![0, -1, 2, -1, 4, -1]));
}

#[test]
fn external32_bytes() {
    let s = Datatype::create_struct(
        &[1, 1, 1, 1],
        &[0, 4, 8, 16],
        &[
            b(Basic::Int),
            b(Basic::Short),
            b(Basic::Double),
            b(Basic::LongDouble),
        ],
    )
    .unwrap();
    assert_eq!(s.pack_external_size(1).unwrap(), 4 + 2 + 8 + 16);
    let mut buf = [0u8; 32];
    buf[..4].copy_from_slice(&0x01020304i32.to_ne_bytes());
    buf[4..6].copy_from_slice(&(-2i16).to_ne_bytes());
    buf[8..16].copy_from_slice(&1.0f64.to_ne_bytes());
    #[cfg(target_arch = "x86_64")]
    {
        // x87 1.5: significand 0xC000..., exponent 16383
        buf[16..24].copy_from_slice(&0xC000_0000_0000_0000u64.to_le_bytes());
        buf[24..26].copy_from_slice(&16383u16.to_le_bytes());
    }
    let mut out = vec![0u8; 30];
    let mut pos = 0;
    // SAFETY: `buf` covers the struct.
    unsafe { s.pack_external(buf.as_ptr(), 1, &mut out, &mut pos) }.unwrap();
    assert_eq!(&out[..4], &[1, 2, 3, 4]);
    assert_eq!(&out[4..6], &[0xff, 0xfe]);
    assert_eq!(&out[6..14], &[0x3f, 0xf0, 0, 0, 0, 0, 0, 0]);
    #[cfg(target_arch = "x86_64")]
    assert_eq!(
        &out[14..30],
        &[0x3f, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    );
    let mut back = [0u8; 32];
    let mut pos = 0;
    // SAFETY: `back` covers the struct.
    unsafe { s.unpack_external(&out, &mut pos, back.as_mut_ptr(), 1) }.unwrap();
    assert_eq!(&back[..6], &buf[..6]);
    assert_eq!(&back[8..26], &buf[8..26]);
    // too small
    let mut small = [0u8; 29];
    let mut pos = 0;
    // SAFETY: as above.
    let e = unsafe { s.pack_external(buf.as_ptr(), 1, &mut small, &mut pos) };
    assert!(matches!(e, Err(Error::Truncate { .. })));
    // complex: each part swapped on its own
    let z = b(Basic::CFloatComplex);
    let mut zb = [0u8; 8];
    zb[..4].copy_from_slice(&1.0f32.to_ne_bytes());
    zb[4..].copy_from_slice(&2.0f32.to_ne_bytes());
    let mut out = [0u8; 8];
    let mut pos = 0;
    // SAFETY: `zb` is one complex.
    unsafe { z.pack_external(zb.as_ptr(), 1, &mut out, &mut pos) }.unwrap();
    assert_eq!(out, [0x3f, 0x80, 0, 0, 0x40, 0, 0, 0]);
}

#[test]
fn mpi_bottom_absolute_addresses() {
    let a = [1i32, 2, 3];
    let d = [4.5f64, 5.5];
    // (from pointers to the whole arrays: the type reaches past the element addressed)
    let addrs = [
        madmpi_datatypes::get_address(a.as_ptr().wrapping_add(1)),
        madmpi_datatypes::get_address(d.as_ptr()),
    ];
    let t = Datatype::create_struct(&[2, 1], &addrs, &[b(Basic::Int), b(Basic::Double)]).unwrap();
    let mut out = [0u8; 16];
    // SAFETY: the absolute addresses point into `a` and `d`, alive and initialized.
    let n = unsafe { t.pack(std::ptr::null(), 1, 0, &mut out) };
    assert_eq!(n, 16);
    assert_eq!(&out[..4], &2i32.to_ne_bytes());
    assert_eq!(&out[4..8], &3i32.to_ne_bytes());
    assert_eq!(&out[8..], &4.5f64.to_ne_bytes());
    let mut a2 = [0i32; 3];
    let mut d2 = [0f64; 2];
    // addresses taken from mutable pointers: they will be written through
    let addrs = [
        madmpi_datatypes::get_address(a2.as_mut_ptr().wrapping_add(1)),
        madmpi_datatypes::get_address(d2.as_mut_ptr()),
    ];
    let t = Datatype::create_struct(&[2, 1], &addrs, &[b(Basic::Int), b(Basic::Double)]).unwrap();
    // SAFETY: the absolute addresses point into `a2` and `d2`, alive and writable.
    let n = unsafe { t.unpack(std::ptr::null_mut(), 1, 0, &out) };
    assert_eq!(n, 16);
    assert_eq!((a2, d2), ([0, 2, 3], [4.5, 0.0]));
}

#[test]
fn uniform_elements_for_reductions() {
    let di = b(Basic::DoubleInt);
    let c = Datatype::contiguous(4, &di).unwrap();
    assert_eq!(c.uniform_element(), Some((Basic::DoubleInt, 4)));
    let v = Datatype::vector(3, 2, 5, &b(Basic::Int)).unwrap();
    assert_eq!(v.uniform_element(), Some((Basic::Int, 6)));
    let s = Datatype::create_struct(
        &[2, 1, 0],
        &[0, 16, 32],
        &[v.clone(), b(Basic::Int), b(Basic::Double)],
    )
    .unwrap();
    assert_eq!(s.uniform_element(), Some((Basic::Int, 13)));
    let m = Datatype::create_struct(&[1, 1], &[0, 8], &[b(Basic::Double), b(Basic::Int)]).unwrap();
    assert_eq!(m.uniform_element(), None);
    let f = Datatype::create_f90_real(Some(10), None).unwrap();
    assert_eq!(f.uniform_element(), Some((Basic::Real8, 1)));
    let e = Datatype::contiguous(0, &b(Basic::Int)).unwrap();
    assert_eq!(e.uniform_element(), Some((Basic::Byte, 0)));
}
