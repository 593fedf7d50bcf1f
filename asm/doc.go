// Package asm holds qgemv's generated assembly kernels and their Go
// declarations, nothing else: no logic, no dispatch; package cpu decides
// when to call each kernel. "go run ./gen" writes one file pair per kernel
// family, asm/<family>_amd64.s and asm/<family>_amd64.go (never edit
// them); this file, the calling conventions below, is the one written by
// hand. Each kernel's own doc comment says what it computes (shape, batch,
// ISA) and names its family's section here; its "// Requires:" line in
// the .s file lists the CPU features it needs. The Go each family's
// kernels replace, their reference, is named in its section.
//
// Sizes are in bytes unless said otherwise. Every kernel reads and writes
// only through its pointer arguments: each pointer must cover what the
// kernel reads or writes.
//
// # Q4G128 kernels
//
// q4g128_amd64.s: W4A8 and W4A32 dot products of layout.Q4G128 matrices.
// The reference is the Go loop of cpu.a8Generic (W4A8, bit for bit) and
// cpu.a32Generic (W4A32). All take
//
//	func(w *byte, stride int, sc *float32, z *byte, groups int, act *byte, idx *int32, out *float32, nst int)
//
// and work on nst super tiles of L consecutive rows and a batch of M
// vectors, over groups groups of 128 columns:
//
//   - Q4A8Avx512VnniM<M> (M = 1, 2, 4): L = 16
//   - Q4A8AvxVnniM<M>, Q4A8Avx2M<M> (M = 1, 2, 4, 8): L = 8
//   - Q4A32Avx512M<M> (M = 1, 2, 4, 8): L = 8
//   - Q4A32Avx2M<M> (M = 1, 2, 4): L = 4
//   - Q4A8Avx512VnniT<M> (M = 8, 16): L = 16, rows in the lanes
//   - Q4A8AmxT<M> (M = 1, 2, 4, 8, 16): L = 16, AMX tiles
//
// The M kernels compute a super tile as M sub-tiles of R = L/M rows; the
// result lane k of sub-tile u is row u*R + k/M, vector k%M:
//
//	for st := 0; st < nst; st++ {
//		for u := 0; u < M; u++ { // sub-tile of R rows
//			for k := 0; k < L; k++ {
//				row, vec := st*L+u*R+k/M, k%M
//				out[(st*M+u)*L+k] += dot(row, vec)
//			}
//		}
//	}
//
// The T kernels keep the 16 rows in the lanes (no horizontal sums) and
// write out vector-major:
//
//	for st := 0; st < nst; st++ {
//		for v := 0; v < M; v++ {
//			for i := 0; i < 16; i++ {
//				out[(st*M+v)*16+i] += dot(st*16+i, v)
//			}
//		}
//	}
//
// Q4A8AmxT1 writes out as the T kernels do (M = 1); the wider AMX kernels
// write it row-major with 16 vector lanes a row, of which M are used:
//
//	for st := 0; st < nst; st++ {
//		for i := 0; i < 16; i++ {
//			for v := 0; v < M; v++ {
//				out[(st*16+i)*16+v] += dot(st*16+i, v)
//			}
//		}
//	}
//
// Rows are counted from w, stride bytes apart, scales from sc and zero
// points from z (block-contiguous: group g of a row is 128 scales
// further). idx holds the M permutation vectors of L int32 (vector u,
// lane k holds u*R+k/M); the T kernels do not read it. act holds the
// activations prepared per group:
//
//   - W4A8: M blocks of 128 int8 (the 64 even-column activations, then
//     the 64 odd-column ones), then 16 float32 lane scales (xs of vector
//     k%M) and 16 int32 lane sums (the sum of the group's 128 int8 of
//     vector k%M), L of each used: 128*M + 128 bytes per group.
//   - AMX W4A8: the same 128*M + 128 bytes per group, its first 128*M
//     bytes laid out as two B tiles of 16 rows of 4*M bytes: row k of the
//     first holds, for each vector in turn, the 4 activations of the even
//     columns 8k, 8k+2, 8k+4, 8k+6; the second the odd columns 8k+1 ..
//     8k+7 (for M = 1 this is the W4A8 layout above). The kernels load and
//     release their tile configuration; the caller must have the OS's
//     permission to use the tile data.
//   - W4A32: M blocks of 128 float32 (the 64 even-column activations,
//     then the 64 odd-column ones), then 16 float32 lane sums (the
//     group's sum of activations of vector k%M, L used): 512*M + 64 bytes
//     per group.
//
// The kernels add to out, so a caller can split the groups into column
// tiles (w, sc, z and act advanced to the tile's first group) and call a
// kernel once per tile on the same out. The W4A8 kernels add each group's
// scaled dot to the running sum loaded from out, in group order, so the
// tiled result is the untiled one bit for bit.
//
// Preconditions: all rows lie inside one 128-row block of the matrix, the
// first row is a multiple of L, groups >= 1.
//
// # Bits int8 kernels
//
// bits_a8_amd64.s: exact W(n)A8 dot products of layout.Bits matrices
// (n-bit codes in the universal 32-bit packing; a chunk is 32 words, 128
// bytes, of a row), exactly as layout.(*Bits).DotA8Exact, the reference.
// For row i of tile T (row T*R+i, counted from w, stride bytes apart),
// over the blocks of U = min(G, 128) columns (unit 128 for groups of at
// least 128):
//
//	acc = 0
//	for each U-column block B in column order:
//		isum = sum q*xq - z*sum xq        (int32)
//		acc = acc + float32(s*xs[B's 128 inputs]) * float32(isum)
//	out[T*lanes+i] = acc
//
// All take
//
//	func(w *byte, stride int, meta *byte, act *byte, chunks int, out *float32, ntiles int, ctrl *byte, idx *int32)
//
// and walk ntiles tiles of R rows, chunks chunks (or periods) each. Each
// tile stores one vector of lanes results at out (16 float32 with
// AVX-512, 8 with AVX2 and AVX-VNNI): lane i for row i, lanes R and up
// scratch.
//
//   - Bits<n>A8[Meta16]Avx512 (n = 8, 4, 2, 1; AVX-512 VNNI and VBMI) and
//     Bits1A8G64[Meta16]Avx512, groups of at least 128 columns or of 64: a chunk
//     holds bpc = 8/n blocks of 128 columns, each split into sub = 128/U
//     blocks; L = bpc*sub lanes per row and chunk, tiles of R = 16/L rows.
//     meta holds per tile and chunk 16 float32 scales and 16 int32 zeros
//     (128 bytes) or, with Meta16, 16 binary16 scales and 16 int16 zeros
//     (64 bytes; the same result), in lane order (row i, block j of the
//     chunk at lane i*L+j); act holds per chunk L blocks x 2 halves of 64
//     activation bytes in the regrouped order (zero outside the block),
//     then 16 float32 lane scales and 16 int32 lane sums (L*128 + 128
//     bytes); ctrl the bpc VPMULTISHIFTQB control vectors (none for
//     n = 8); idx the L permutations (16 int32 each) gathering lane
//     i*L+j into lane i (unused when L = 1).
//   - Bits<n>A8G32[Meta16]Avx512 and Bits<n>A8G64[Meta16]Avx512 (n = 8,
//     4, 2), groups of 32 columns (one per plane of a chunk) or 64 (two
//     planes): the same signature, tiles, meta and lane order (row i and
//     group j at lane i*L+j), but act holds per
//     chunk one byte per column (1024/n bytes) in the order the kernel
//     reads codes: VPERMB puts byte b = l%4 of words 8(l/4)..+7 of each
//     64-byte half in qword l, a mask (and dword shift) takes field f of
//     every byte, so each dword holds 4 codes of one plane and each
//     VPDPBUSD sums inside one group (cpu.bitsG32Sources); then the 16
//     float32 lane scales and 16 int32 lane sums. The four accumulators of
//     a tile fold into one vector (VSHUFI64X2, VSHUFPS, then VPERMD, or
//     for groups of 64 two VPERMI2D and an add). ctrl is unused.
//   - Bits3A8[G64]Avx512: ten 3-bit planes a word, so chunks counts
//     periods of two chunks (640 columns, 640/U blocks); tiles of 16 rows.
//     meta holds per tile, period and block 16 float32 scales and 16
//     int32 zeros in row order; act holds per period the quads (bits3Quads
//     in gen and cpu) x 2 halves of 64 activation bytes (dword t of half h
//     holds the columns of the quad's four planes at word t+16h, zero
//     outside the quad's block), then per block 16 float32 lane scales and
//     16 int32 lane sums; ctrl the VPMULTISHIFTQB control vectors; idx is
//     unused.
//   - Bits<n>A8[G<U>]Avx2 (VPMADDUBSW, VPMADDWD) and
//     Bits<n>A8[G<U>]AvxVnni (VEX VPDPBUSD), n = 8, 4, 2, 1: nu =
//     128*(8/n)/U units per chunk (at most 8), tiles of R = 8/nu rows.
//     meta holds per tile and chunk 8 float32 scales and 8 int32 zeros
//     (64 bytes) in lane order (row i, unit u of the chunk at lane
//     i*nu+u); act holds per chunk 128*(8/n) activation bytes in the order
//     the kernel reads codes (cpu.newBitsYMM), then 8 float32 lane scales
//     and 8 int32 lane sums; idx the nu permutations (8 int32 each)
//     gathering lane i*nu+u into lane i (unused when nu = 1); ctrl is
//     unused.
//   - Bits3A8Avx2 (VPSHUFB, VPMULHUW, VPMADDWD), groups of at least 128:
//     chunks counts periods of two chunks (640 columns, 5 blocks); tiles
//     of 8 rows. meta holds per tile, period and block 8 float32 scales
//     and 8 int32 zeros in row order; act holds per period, for plane pair
//     q < 10 (planes 2q, 2q+1) and quarter h < 4, 16 int16 activations
//     (lane 8l+2w+e holds column (2q+e)*32 + 8h + 4l + w of the period),
//     then per block 8 float32 lane scales and 8 int32 lane sums; ctrl and
//     idx are unused.
//   - Bits<n>A8Amx[Meta16]T<M> (n = 8, 4; M = 2, 4, 8, 16; AMX-INT8),
//     groups of at least 128 columns: batches of M vectors on AMX tiles,
//     tiles of 16 rows. meta is the AVX-512 kernel's of the same matrix
//     (Bits<n>A8[Meta16]Avx512: meta tiles of 16/bpc rows, so a 16-row
//     tile reads bpc of them). act holds per chunk and 128-column block
//     two B tiles of 16 rows of 4*M bytes, then 16 float32 lane scales
//     (xs of vector v in lane v) and 16 int32 lane sums (the sum of the
//     block's int8 of vector v): 128*M + 128 bytes per block. Row t of B
//     tile a holds, for each vector in turn, the activations of the block
//     columns 32*perm[p] + 16a + t, p = 0..3, with perm = (3, 2, 1, 0)
//     for n = 8 (the A tiles are the weight words as stored: byte p of
//     word 16a+t is plane 3-p) and (3, 1, 2, 0) for n = 4 (each chunk's
//     codes are regrouped so that a dword holds one block's planes: low
//     nibbles of bytes 2, 3 and high nibbles of bytes 2, 3 for block 0,
//     bytes 0, 1 for block 1). out is row-major with 16 vector lanes a
//     row, of which M are used, stored (not added):
//     out[(T*16+i)*16+v] = dot(T*16+i, v). The kernels load and release
//     their tile configuration; the caller must have the OS's permission
//     to use the tile data.
//   - Bits<n>A8[Meta16]T<M>Avx512 (n = 8, 4; M = 2, 4, 8, 16; AVX-512
//     VNNI, BW, GFNI), groups of at least 128 columns: the AMX kernels'
//     contract with VPDPBUSD, except that act holds per block M
//     vector-major runs of 128 bytes (byte 4d+p of vector v: its
//     activation of dword d of B tile row d above) before the lane scales
//     and sums, and out is vector-major per tile: out[(T*M+v)*16+i] =
//     dot(T*16+i, v).
//
// Preconditions: chunks >= 1, ntiles >= 1, zero points integers.
//
// # Bits float32 kernels
//
// bits_a32_amd64.s: Bits<n>A32S<seg>[Meta16]Avx512 (AVX-512F) and
// Bits<n>A32S<seg>[Meta16]Avx2 (AVX2 and FMA), n = 8, 4, 3, 2, 1; the
// Meta16 kernels also need F16C. They take
//
//	func(w *byte, stride int, meta *float32, x *float32, xsum *float32, out *float32, rows int, chunks int)
//
// and compute W(n)A32 dot products of layout.Bits matrices one row at a
// time, for rows rows from w (stride bytes apart), chunks chunks of 32
// words each:
//
//	out[r] = sum over segments j of s[j]*sum(q*x) - (s*z)[j]*xsum[j]
//
// where a segment is seg planes (seg*32 columns, inside one group; a
// chunk holds 32/n planes) and x holds the zero-padded activations. The
// universal packing needs no activation reordering: plane i of W words is
// W consecutive columns (W = 16 with AVX-512, 8 with AVX2). meta holds per
// row and segment the float32 pair (s, s*z), and xsum the activations'
// sum per segment. With Meta16, meta holds the format's own 4 bytes per
// row and segment: per row and chunk P binary16 scales s then P binary16
// zeros z (P the segments per chunk rounded up to a power of two, slots
// past the chunk's segments zero; s*z rounded to float32 as
// layout.(*Bits).Affine does), and xsum P slots per chunk (zero past its
// segments). Results are within layout.BitsTolerance of the float64
// reference, layout.(*Bits).DotRef. The AVX-512 kernels with n <= 2 and
// seg*n >= 4 are not built: the lookup-table kernels run those shapes.
//
// Preconditions: rows, chunks >= 1.
//
// # Bits lookup-table kernels
//
// bits_lut_amd64.s: W1A32 and W2A32 with AVX-512F and 16 rows in the
// lanes: for every nibble of a word (4/n codes) a 16-entry table holds
// the sum of the nibble's activations for each code combination, so one
// VPERMPS and one VADDPS handle 16 rows' nibble.
//
// BitsLutTables<n>Avx512 (n = 1, 2) takes
//
//	func(tab *float32, sums *float32, x *float32, chunks int)
//
// and writes, for chunks chunks of 32*(32/n) float32 activations at x
// (column (k*(32/n) + i)*32 + t of chunk k is element i of lane t), the
// lookup tables of the Bits<n>Lut kernels: table (k, t, j) at tab +
// ((k*32 + t)*8 + j)*16 holds, for each 4-bit index e, the sum over the
// nibble's 4/n fields u (index bits n*u ..) of field(e, u) times the
// activation of the field's element (word bits 28-4j .. 31-4j hold the
// nibble), accumulated field by field in order of u. sums + (k*8 + j)*16
// receives the sum over t of the chunk's tables (k, t, j): its entry for
// the index with every field 1 is the sum of the nibble column's
// activations. Precondition: chunks >= 1.
//
// Bits<n>LutA32S<seg>[F16][Nta]Avx512 (segments of seg planes, seg*n >= 4)
// take
//
//	func(w *byte, tab *float32, xsum *float32, out *float32, blocks int, chunks int, stride int)
//
// and compute the dot products of blocks blocks of 16 rows over chunks
// chunks, adding them to out (16 float32 per block):
//
//	out[16*T + i] += sum over segments j of s[j]*sum(q*x) - m[j]*xsum[j]
//
// for row i of block T, where a segment is seg planes (seg*32 columns,
// inside one group). w holds the words in the kernels' order (cpu's
// lutPack): chunk by chunk, stride bytes apart, each chunk's blocks one
// after the other as units: the block's words (word by word, a word as 16
// dwords, row i's at dword i), then its metadata for the chunk: per
// segment 16 float32 scales s, then 16 float32 m (s*z, or -o with
// offsets), one per row; with F16, per segment 16 binary16 scales s, then
// 16 binary16 zero points z, one per row, and m = s*z in float32. A unit
// is 2048 + 128*(32/n/seg) bytes, or 2048 + 64*(32/n/seg) with F16. tab
// holds the chunks' tables (BitsLutTables<n>Avx512), xsum the activations'
// sum per segment. Per word t of a chunk, lane i of the block's vector is
// row i; nibble j's index then picks, per row, the sum of the activations
// its codes select from table (k, t, j). The chunk's tables stay in L1 for
// all the blocks; w is prefetched a few units ahead (the kernel's doc says
// how many), across the jump to the next chunk, with PREFETCHT1 or, in the
// Nta kernels (for AMD cores), PREFETCHNTA. Results are within layout.BitsTolerance of the float64
// reference, layout.(*Bits).DotRef.
//
// Preconditions: blocks, chunks >= 1; stride >= blocks times the unit.
//
// # Sparse12 kernels
//
// sparse12_amd64.s: layout.Sparse12 matrices (1:2 structured sparsity:
// per pair of columns one 7-bit value q and a position bit, the pair
// byte pos<<7 | q; a chunk is 32 words, 128 pairs, 256 columns, of a
// row).
//
// Int8 activations: the exact W(1:2, 7-bit)A8 dot products of
// layout.(*Sparse12).DotA8Exact, the reference: for row i of tile T (row
// T*R+i from w, stride bytes apart), over the blocks B of U = min(G, 128)
// columns in order, acc = acc + float32(s*xs[B]) * float32(isum), with
// isum the exact sum of (q-z)*x over the pairs' kept columns;
// out[T*lanes+i] = acc. They take the signature of the Bits int8
// kernels, walk ntiles tiles of R rows, chunks chunks each, and store one
// vector of lanes results per tile (lane i for row i, lanes R and up
// scratch):
//
//   - Sparse12A8Avx512 and Sparse12A8G64Avx512 (AVX-512 VNNI, VBMI and
//     BW; 16 lanes), groups of at least 128 or of 64 columns: L = 2 or 4
//     lanes per row and chunk (row i, block or 64-column sub-block j at
//     lane i*L+j), tiles of R = 16/L rows. meta holds per tile and chunk,
//     in 192 bytes, 16 float32 scales, 16 int32 corrections 128*sum(q-z)
//     and 16 zero-point bytes, in lane order; act holds per chunk the two
//     128-column blocks' 64 even-column and 64 odd-column activations
//     plus 128 (as bytes, in the order ctrl gathers the pairs), then 16
//     float32 lane scales (320 bytes); ctrl the two VPERMT2B index
//     vectors; idx the L lane permutations (16 int32 each) gathering lane
//     i*L+j into lane i.
//   - Sparse12A8[G<U>]Avx2 (VPBLENDVB, VPSIGNB, VPMADDUBSW, VPMADDWD) and
//     Sparse12A8[G<U>]AvxVnni (VPBLENDVB, VEX VPDPBUSD); 8 lanes: nu =
//     256/U units per chunk, tiles of R = 8/nu rows, row i and unit u at
//     lane i*nu+u. meta holds per tile and chunk 8 float32 scales, with
//     AvxVnni 8 int32 corrections 128*sum(q-z) over the unit's kept codes,
//     and 8 zero-point bytes (40 bytes, or 72 with AvxVnni); act holds per
//     chunk, per quarter of 8 words, 32 even-column and 32 odd-column
//     activations (int8, or with AvxVnni plus 128 as bytes) in the order
//     the transposed pair bytes are read (cpu.newSparseYMM), then 8
//     float32 lane scales (288 bytes); idx the nu permutations (8 int32
//     each) gathering lane i*nu+u into lane i; ctrl is unused.
//
// Preconditions: chunks >= 1, ntiles >= 1, zero points integers in
// 0..127.
//
// Float32 activations, one row at a time: Sparse12A32S<seg>[Meta16]Avx512
// (AVX-512F) and Sparse12A32S<seg>[Meta16]Avx2 (AVX2 and FMA); the Meta16
// kernels also need F16C. They take
//
//	func(w *byte, stride int, meta *float32, xe *float32, xo *float32, out *float32, rows int, chunks int)
//
// and compute, for rows rows from w (stride bytes apart), chunks chunks
// each: for each pair byte (pos<<7 | q) of pair p the position bit selects
// xe[p] or xo[p] (the even- and odd-column activations of pair p), and per
// segment of seg planes (seg*64 columns, inside one group)
//
//	acc += s*sum(q*x_sel) - (s*z)*sum(x_sel)
//
// then out[r] = acc. meta holds (s, s*z) as float32 per row and segment,
// or with Meta16 per row and chunk P = 4/seg binary16 scales s, then P
// binary16 zeros z (s*z rounded to float32 as layout.(*Sparse12).Affine
// does). Results are within layout.BitsTolerance of the float64
// reference, layout.(*Sparse12).DotRef. Preconditions: rows, chunks >= 1.
//
// # Codebook kernels
//
// codebook_amd64.s: layout/codebook matrices (M codebooks of 2^b
// centroids of v columns, a scale per row and group of spg segments),
// multiplied through Psumbooks: per input segment s and codebook i, the
// table tab_i[s][q] of the segment's inner products with every centroid
// q. The Go they replace is cpu.(*CBMatrix).tables (the Psumbook) and
// cpu.(*CBMatrix).mulVec (lookups and the dequantize baseline); the
// float64 reference is codebook.(*Codebook).DotRef. Codes live in lane
// bit streams of 32-row tiles: word w of rows t..t+15 (t = 0 or 16) is 16
// consecutive uint32 at words + w*128 (+ 4*t), code j at bits j*b.. of the
// lane's stream, possibly straddling into word w+1; a period is the P =
// 32/gcd(32, b) codes after which the bit offsets repeat.
//
// Psumbook builders (ct: the centroids transposed, v rows of k float32;
// products accumulated in e order with fused multiply-adds, the first a
// multiply: the same value; nseg >= 1):
//
//   - CbTableV<v>{Avx512,Avx2}: func(ct *float32, x *float32, out
//     *float32, nseg int, k int): for s < nseg, q < k, out[s*k+q] =
//     sum_{e<v} ct[e*k+q] * x[s*v+e]. k a multiple of 16 (Avx512) or 8.
//   - CbTableF16V<v>Avx512: func(ct *float32, x *float32, out *uint16,
//     nseg int, k int, inv float32): out[s*k+q] = binary16(inv * the same
//     sum) (the product by inv exact for a power of two, chosen by the
//     caller so that every entry is finite; rounded to nearest even). k a
//     multiple of 16.
//   - CbTableI16V<v>Avx512: func(ct *float32, x *float32, out *uint8, nseg
//     int, k int, inv float32): with h = int16(round(inv * the same sum))
//     (rounded to nearest even, then truncated to 16 bits), out[s*2k+q] is
//     the low byte of h and out[s*2k+k+q] its high byte. The caller picks
//     inv so that every entry is at most 32767 in magnitude. k a multiple
//     of 32.
//
// Gather lookups, CbPsumB<b>M<m>{Avx512,Avx2} (Psumbook lookups) and
// CbDequantB<b>M<m>{Avx512,Avx2} (centroid gathers times activations, the
// baseline), b = 4, 6, 8, 10, 12, m = 1, 2 codebooks, for the 16 (Avx512)
// or 8 (Avx2) rows of a block of a tile:
//
//	func(words *uint32, cbstride int, nper int, tab *float32, tabstride int, segbytes int, x *float32, v int, spg int, scales *float32, sstride int, acc *float32)
//
// for nper periods of P segments:
//
//	for each group g of spg segments: acc[l] += scales[g*sstride/4 + l] * sum over the
//		group's segments s and codebooks i of tab_i[s][c_i]           (CbPsum)
//		                                   or sum_e C_i[c_i][e] * x[s*v+e] (CbDequant)
//
// where tab_i = tab + i*tabstride bytes with segbytes bytes per segment
// (CbPsum), or C_i = tab + i*tabstride bytes with v float32 per centroid
// (CbDequant), and c_i is the code of lane l and segment s in the lane bit
// stream at words + i*cbstride (bytes; word w of the block's lanes at
// words + w*128), segment s at bit s*b. Lookups of a group are summed in
// segment then codebook order. Preconditions: nper >= 1; spg >= 1 divides
// nper*P or is a multiple of P; the word after every code's first word
// readable (layout/codebook keeps 32 zero words at the end).
//
// CbPsumF16B<b>M<m>Avx512 (b = 4, 6, 8, m = 1, 2; binary16 tables held in
// vector registers, read with VPERMW / VPERMT2W) take
//
//	func(words *uint32, cbstride int, nper int, tab *uint16, tabstride int, spg int, scales *float32, sstride int, acc *float32, pf int)
//
// and accumulate the CbPsum sums for the 32 rows of a tile (lanes l < 32;
// rows 16..31 are the tile's second 16 lanes, 64 bytes into each word
// line), from binary16 tables: tab_i = tab + i*tabstride bytes, 2^b
// entries per segment (CbTableF16), each lookup widened to float32 and the
// sums taken in float32. The code words pf bytes ahead (the next tile's)
// are prefetched; nothing past the tables is read. Preconditions as for
// the gather lookups.
//
// CbPsumI16B8M<m>Avx512 and CbPsumI16PB8M<m>Avx512 (8-bit codes, int16
// Psumbooks from CbTableI16 read with byte permutes, 64 rows per lookup)
// take
//
//	func(codes *uint8, bstride int, cbstride int, nblk int, nseg int, tab *uint8, tabstride int, spg int, scales *float32, sstride int, acc *float32, pf int)
//
// and compute, for nblk blocks of 64 rows and nseg segments:
//
//	for each block b, position r < 64 and run of spg segments (the last may be shorter):
//		acc[64b + r] += scales[64b + r + g*sstride/4] * float32(sum over the run's
//		segments s and codebooks i of int16(lo_i[s][c] | hi_i[s][c]<<8))
//
// where g counts the block's runs and lo_i/hi_i are the 256 low / high
// bytes of segment s's table at tab + i*tabstride + 512*s. CbPsumI16 reads
// the CPU's transposed copy of the codes: c is byte p of the 64 at codes +
// b*bstride + i*cbstride + 64*s with cpu.cbI16Row(p) = r. CbPsumI16P reads
// layout/codebook's packed words in place: position r of a block is row
// cpu.cbI16PRow(r) of its 64 (scales and acc are in position order), c is
// that row's code i of segment s: for rows 0-31 of block b, byte s%4 of
// word s/4 of a 32-row tile whose codebook-i words start at codes +
// b*bstride + i*cbstride, for rows 32-63 the tile bstride/2 bytes further.
// The int32 run sums are exact (nseg*M*32768 < 2^31); each is converted to
// float32 once. The codes pf bytes ahead are prefetched (prefetches never
// fault). Preconditions: nblk >= 1, nseg >= 1 (CbPsumI16P: a multiple of
// 4), spg >= 1.
//
// CbPsumScalarB8M<m>Avx2 (8-bit codes, one scalar load per code instead
// of gathers) takes
//
//	func(words *uint32, tstride int, cbstride int, ntiles int, nw int, tab *float32, tabstride int, wpg int, scales *float32, sstride int, acc *float32)
//
// and computes, for ntiles 32-row tiles of a column tile of nw words (4
// segments each) per row:
//
//	for each tile t, row r < 32 and group g of wpg words (4*wpg segments):
//		acc[32*t + r] += scales[32*t + r + g*sstride/4] * sum over the group's
//		segments s and codebooks i of tab_i[s][c_i]
//
// where tab_i = tab + i*tabstride bytes (256 float32 per segment, 1024
// bytes) and c_i is byte s%4 of word s/4 of row r at words + t*tstride +
// i*cbstride (bytes; word w of the tile's rows at w*128 + 4*r). Per group,
// the lookups are summed in word, then codebook, then segment order, and
// the product with the scale is rounded before the add; scales advance
// 128 bytes per tile. The words of a tile a few tiles ahead (the kernel's
// doc says how many) are prefetched (prefetches never fault). Preconditions: ntiles >= 1; nw >= 1 and
// wpg >= 1 divides nw.
//
// NearestV<v>{Avx512,Avx2}, the codebook quantizer's assignment (the Go it
// replaces is layout/codebook's nearest), take
//
//	func(x *float32, n int, ct *float32, k int, norm *float32, out *uint32)
//
// and set, for p < n, out[p] to the q < k minimizing norm[q] -
// 2*(x[p*v]*ct[q] + x[p*v+1]*ct[k+q] + ...), the v products (ct: the
// centroids transposed, v rows of k float32) rounded and added in element
// order, the sum doubled and subtracted from norm[q] in float32: the least
// q of equal values; NaN never least, and 0 when no value is below +Inf.
// Preconditions: n >= 1, k a multiple of 16 (Avx512) or 8.
//
// # ANS kernels
//
// ans_amd64.s: the fused rANS decode and int8 dot product of layout/ans
// units (32 interleaved coders each; 64 state words, then the interleaved
// stream), decoding steps quads of each coder exactly as the generic
// decoder does; the Go they replace is ans.(*Matrix).DotUnit. With warp
// rows quad j of coder t meets the 4 int8 inputs at v + 128*j + 4*t (lane
// t's own inputs); with warp stripes those at v + 4*j (the same for every
// lane).
//
// AnsDot{Rows,Stripes}X<u>[Madd|MaddQ]Avx512 (u = 1, 2 units, two
// independent state chains interleaved; AVX-512 F, BW, DQ, VBMI, VBMI2,
// VNNI, BMI2 and POPCNT) take
//
//	func(words *[2]*uint32, nwords *[2]int, steps int, tabs *byte, v *int8, acc *int32, esc *[2]*int8, nesc *[2]int, ahead int) int
//
// and store to acc[32U+t] (int32), for each unit U < u (the nwords[U]
// words at words[U]), the sum over quads j of the dot product of coder
// t's values with its inputs. tabs holds three 128-byte tables indexed by
// slot digit (the digit's symbol frequency, the digit minus the symbol's
// cumulative frequency, the value plus 128, for the escape symbol a
// marker byte that no other symbol's value plus 128 equals), then 64
// copies of the marker. Unit U's escaped values are the nesc[U] bytes at
// esc[U], each the value plus 128 (the int8 XOR 0x80), in decoding order
// (step, lane, element); each half step expand-loads the next ones into
// the escaped positions, without a branch. The products use unsigned
// (value+128) times signed inputs (VPDPBUSD), so the caller subtracts 128
// times the sum of each lane's inputs. Each step also prefetches the line ahead
// bytes past each unit's next word (the warp-rows caller's next units).
// The mode says how F, the rank and the state product are computed: the
// plain kernels with VPMULLD and VPMULLQ (they alone handle frequency 128,
// a one-symbol model); Madd with byte and word multiply-adds and two
// VPMULUDQ (for Intel cores); MaddQ with the multiply-adds and one VPMULLQ
// (for Zen 5). The Madd and MaddQ kernels need every frequency <= 127.
//
// They return 0, -1 if a unit's words run out, -2 if a unit decodes more
// or fewer escapes than nesc[U], -3 if a coder's initial state is outside
// [2^31, 2^63) or its final state is not 2^31. They decode nothing from
// outside words[U][0:nwords[U]] (nwords[U] >= 64) or esc[U][0:nesc[U]],
// but load up to 16 words past the stream position: words[U][nwords[U]]
// to words[U][nwords[U]+15] must be readable, and the escape expand-loads
// cover up to 64 bytes from the list position (esc[U][nesc[U]] to
// esc[U][nesc[U]+63] must be readable; a unit with nesc[U] = 0 never reads
// esc[U], the count being checked before any expand-load).
//
// AnsDot{Rows,Stripes}Avx2 (AVX2 and POPCNT, one unit) take
//
//	func(words *uint32, nwords int, steps int, tab *uint32, v *int8, acc *int32, esc *uint32, escCap int) int
//
// and store to acc[t] (int32) the sum over quads j of the dot product of
// coder t's values with its inputs. tab holds 128 dwords indexed by slot
// digit: byte 0 the digit's symbol frequency, byte 1 the digit minus the
// symbol's cumulative frequency, byte 2 0x80 for the escape symbol else 0,
// byte 3 the value (0 for the escape symbol). Each escape is recorded, in
// decoding order, as esc[n] = j<<8 | t<<2 | e (quad, lane, element) for
// the caller to add. They return the number of escapes, -1 if the words
// run out, -2 if more than escCap escapes occur, -3 if a coder's initial
// state is outside [2^31, 2^63) or its final state is not 2^31, and never
// read outside words[0:nwords] (nwords >= 64).
//
// # Int8 GEMV kernels
//
// int8_amd64.s: exact int8 x int8 dot products, four rows at a time, for
// the MatVANS int8 baseline; the reference is cpu.dotInt8:
//
//	for r := 0; r < 4*quads; r++ {
//		out[r] = dotInt8(w[r*stride:r*stride+n], v)
//	}
//
// with row r at w + r*stride and n = 64*n64 or 32*n32 columns.
//
//   - Int8GemvAvx512 (AVX-512 VNNI): func(w *int8, stride int, x *uint8,
//     n64 int, quads int, out *int32): out[r] = sum over c < 64*n64 of
//     int32(x[c]) * int32(w[r][c]), with x unsigned bytes and w signed
//     (VPDPBUSD); callers pass x = v + 128 and subtract 128 times the row
//     sum of w to get the signed product. Preconditions: n64 >= 1,
//     quads >= 1.
//   - Int8GemvAvx2 (AVX2): func(w *int8, stride int, x *int16, n32 int,
//     quads int, out *int32): out[r] = sum over c < 32*n32 of
//     int32(x[c]) * int32(w[r][c]), with x the activations sign-extended
//     to int16 (VPMOVSXBW + VPMADDWD: exact, no saturation).
//     Preconditions: n32 >= 1, quads >= 1.
//
// # GGML block kernels
//
// ggml_amd64.s: llama.cpp's block types (layout/ggml) with int8
// activations, the exact definition of layout/ggml's package doc; the
// reference is cpu.ggmlA8Rows. The one-vector kernels Ggml<type>A8Avx512
// have the signature func(w *byte, stride int, rows int, nsb int,
// act *int8, astride int, sums *int16, sstride int, xs *float32,
// xstride int, nvec int, out *float32, ostride int): for r < rows (row r
// at w + r*stride, nsb super-blocks, or groups of four 32-element blocks)
// and v < nvec, out[v*ostride + r] (byte strides) = the exact A8 product
// of row r with vector v, whose activations are at act + v*astride
// (layout per kernel), its int16 per-sub-block (per-block) sums at
// sums + v*sstride and its float32 scales at xs + v*xstride. A row's
// blocks are unpacked once for all vectors: codes to unsigned bytes, the
// sub-block scales to int16 lanes (VPERMW), then VPMADDUBSW and
// VPMADDWD/VPDPWSSD (VPDPBUSD for IQ4_XS and the 32-element types) per
// vector, the halves (blocks) and the sums term reduced together, and the
// float steps in scalar SSE in the definition's order.
//
// The four-row kernels Ggml<type>A8R4Avx512 (every type) and
// Ggml<type>A8R4Avx2 (super-block types) have the
// one-vector signature for one vector (nvec and the strides ignored) and
// rows a multiple of 4, out[r] of that vector; the reductions and float
// steps run with the four rows in the lanes, and the next four rows are
// prefetched in memory order.
//
// The AVX2 batch kernels Ggml<type>A8M16FullAvx2 and Ggml<type>A8M16Avx2
// (Q2_K to Q6_K; the first runs all 16 lanes whatever nvec is, the
// activations of unused vectors zero, the second only the pairs that hold
// nvec vectors) have the signature func(w *byte, stride int, rows int,
// nsb int, act *int8, astride int, sums *int32, xs *float32, nvec int,
// out *float32). Two vectors share an accumulator (one per 128-bit lane):
// super-block k's activations take 4096 bytes at act + 4096k, half h,
// pair j (vectors 2j, 2j+1) and chunk c (16 columns) the 32 bytes at
// 2048h + 256j + 32c, 16 bytes of vector 2j then 16 of vector 2j+1,
// columns 16c .. 16c+15 of the half in order. The 16 lanes of the sums
// (int16 pairs of sub-blocks per dword, 16 lanes per pair and
// super-block), of xs (16 lanes per 128 columns) and of row r's results
// hold the vectors 0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15,
// the order the pair reduction leaves them in; the vectors sit in the
// lanes of the float steps. Row r's results are accumulated into
// out[16r .. 16r+15], which the caller zeroes before the first
// super-block, so that it can run the rows over a few super-blocks per
// call.
// Preconditions: rows, nsb >= 1, 1 <= nvec <= 16 (batch kernels: the
// lanes of vectors from nvec on have zero sums and scales).
//
// The rows-in-lanes batch kernels Ggml<type>A8T<M>Avx512 (the
// super-block types, M = 4, 8 and 16 vector slots) have the signature
// func(w *byte, stride int, nsb int, act *int8, out *float32): 16 rows at
// w (stride bytes apart), nsb super-blocks each, and M vector slots.
// Super-block k's activations take B bytes at act + Bk: slot v's 256 int8
// in column order at 256v; then per half h and slot v the np = 128/sub/2
// dwords (sub the type's sub-block columns: np = 2 for Q4_K, Q5_K and
// IQ4_XS, 4 for Q2_K, Q3_K and Q6_K) at P + 4np*(M*h + v) + 4p, P = 256M,
// holding the int16 sums of the half's sub-blocks 2p (low word)
// and 2p+1; then per half and slot the float32 scale at X + 4*(M*h + v),
// X = P + 8M*np, B = X + 8M. Unused slots are zero. Row r's product with
// slot v is accumulated into out[16v + r], which the caller zeroes.
// Preconditions: nsb >= 1.
//
// The 32-element types have rows-in-lanes kernels of the same name and
// signature, nsb counting groups of four blocks (128 columns), whose
// activations take 148M bytes per group: slot v's 128 int8 in column
// order at 128v; its int32 start values at 128M + 16v + 4b (block b of
// the group: -2^shift times the block's activation sum, shift 3 for Q4_0,
// 4 for Q5_0 and 7 for Q8_0 and IQ4_NL, whose codes the kernels take as
// unsigned q + 2^shift, and 0 for Q4_1 and Q5_1, whose kernels start at 0
// and take the value as minus the sum of their M term); its float32 scale
// at 144M + 4v. They write out[16v + r].
// Ggml<type>A8T<M>Avx2 are the same kernels on AVX2 (and F16C); the Q8_0
// and IQ4_NL ones ignore the start values (their codes stay signed: |q|
// times x*sign(q)).
//
// # Activation kernels
//
// act_amd64.s: activation preparation.
//
// WidenF16 (F16C), func(dst *float32, src *uint16, n int), widens n
// binary16 values at src to float32 at dst (VCVTPH2PS on YMM), 32 per
// iteration: exact, with signaling NaNs quieted; the Go it replaces is
// cpu.widenF16 (widen_other.go). Preconditions: n >= 32 and a multiple of
// 32.
//
// QuantizeA8Avx512 (AVX-512F, BW and VL) and QuantizeA8Avx2 (AVX2), four
// groups at a time while four remain, func(x *float32,
// groups int, q *int8, scales *float32) int, quantize groups of 128
// float32 at x to int8 at q with one scale per group at scales, exactly as
// layout.QuantizeA8 does:
//
//	amax := max |x[i]| over the group
//	scales[g] = amax / 127
//	q[i] = round-half-even(x[i] * (127 / amax)), clamped to [-127, 127]
//
// (all zero when amax is 0). They stop at the first group they leave to
// the caller and return that group's index, or -1 after all groups: a
// group holding NaN or Inf, or one whose amax is below 2^-100, where
// 127/amax could overflow and the Go code's NaN and Inf semantics would
// apply.
//
// # Weight quantization kernels
//
// quant_amd64.s: quantizing float weights on load.
//
// Q4EncodeAvx2 (AVX2), func(vals *float32, n int, q *uint8, s float32, z
// float32, best float64) float64, encodes one candidate of layout.QuantizeQ4G128's
// search (about 75 per group of 128 weights): for each of the n values
//
//	q[i] = clamp(round(vals[i] / s) + z, 0, 15)   (round: halves away from zero)
//	d    = float64(float32(q[i] - z) * s) - float64(vals[i])
//
// and returns the sum of d*d in float64 over eight lanes (value i in lane
// i mod 8), combined as ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7)): bit
// for bit what layout's Go encoder computes. After every 16 values it
// returns the sum so far if that exceeds best (the candidate has lost: no
// later value can lower it), leaving the rest of q unwritten; with best
// +Inf it always runs to the end. Preconditions: n > 0 and a multiple of
// 8, s finite and nonzero, z an integer in [0, 15].
//
// BitsEncodeAvx2 (AVX2), func(vals *float32, n int, q *uint32, s, z, qmax,
// best float64) float64, is the same (its check after every 8 values) for the Bits and Sparse12 quantizers'
// candidates, in float64 throughout:
//
//	q[i] = clamp(round(float64(vals[i]) / s + z), 0, qmax)   (round: halves away from zero)
//	d    = (q[i] - z) * s - float64(vals[i])
//
// summed as above. Preconditions: n > 0 and a multiple of 8, s finite and
// nonzero, z finite (any real zero point).
//
// Q4EncodeAvx512 and BitsEncodeAvx512 (AVX-512F) are the same on ZMM
// (Q4EncodeAvx512 for n a multiple of 16): the ties are compared into a
// mask and fixed with a masked add, the codes narrowed with VPMOVDB, and
// the squares of each eight values added to one accumulator of eight
// float64 lanes, value i in lane i mod 8. Their codes and whole sums are
// bit for bit the AVX2 kernels'; they check for the early exit every 32
// (Q4) or 16 (Bits) values, so a sum they stop at may differ (it exceeds
// best either way).
//
// # Streaming read
//
// stream_amd64.s: StreamRead[Shape]Avx512 and StreamRead[Shape]Avx2,
// func(b []uint64) uint64, the loop shapes of the read-bandwidth
// roofline (none: one sequential stream; X4: four interleaved streams
// over the quarters of b's whole lines, then the rest; Pf: PREFETCHT0
// 4 KiB ahead; Nt: VMOVNTDQA loads, b's lines 64-byte aligned): they xor
// every 64-byte line of b into a checksum with vector loads, the same
// value as (cpu's streamReadGeneric)
//
//	var acc [8]uint64
//	for i, v := range b[:len(b)&^7] { acc[i%8] ^= v }
//	return acc[0] ^ acc[1] ^ ... ^ acc[7]
//
// and ignore the len(b)%8 trailing words (the caller xors those).
package asm
