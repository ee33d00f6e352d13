import Darkroom
import DarkroomTesting
import DarkroomVipsTesting
import Foundation
import Testing

/// A JPEG's rows reduced as libjpeg decodes them must give the bytes of the whole decode resized
/// by libvips: the same integer shrink, kernel geometry, fixed-point coefficients and liborc
/// arithmetic, only fed a row at a time.
@Suite("Rows reduced as they are decoded")
struct RowReduceTests {
  static func expectSame(_ a: VipsImage, _ b: VipsImage, _ what: String) throws {
    #expect(a.width == b.width && a.height == b.height && a.bands == b.bands, "\(what): sizes differ")
    VectorisedReduceTests.expectSame(try a.pixelBytes(), try b.pixelBytes(), what)
  }

  @Test(
    "every height, scale and kernel gives vips_reducev's bytes",
    arguments: [1, 3], [ResizeKernel.lanczos3, .lanczos2])
  func sameBytesAsLibvips(bands: Int, kernel: ResizeKernel) throws {
    // 37 pixels: 111 bytes a row with three bands, so both the 16-byte loop and the rest run.
    for height in [1, 2, 3, 4, 5, 7, 16, 17, 64, 301, 1022, 1250] {
      let image = try VectorisedReduceTests.busy(width: 37, height: height, bands: bands).materialized()
      image.markSequential()  // as a loader's image: libvips reduces it ten rows at a time
      for vertical in [0.999, 0.75, 0.704, 0.5, 0.45, 0.3333, 0.3, 0.24, 0.2, 0.11, 0.05, 0.03, 0.0071]
      where Double(height) * vertical >= 1 {
        let what = "\(height) rows × \(bands) bands by \(vertical) with \(kernel)"
        let rows = try #require(try image.reducedByRows(vertical: vertical, kernel: kernel), "\(what) declined")
        let libvips = try image.resizedByLibvips(horizontal: 1, vertical: vertical, kernel: kernel)
        try Self.expectSame(rows, libvips, what)
      }
    }
  }

  @Test("what libvips would not reduce with liborc's arithmetic is declined")
  func declines() throws {
    let image = try VectorisedReduceTests.busy(width: 16, height: 64, bands: 3).materialized()
    #expect(try image.reducedByRows(vertical: 0.5, kernel: .lanczos3) == nil)  // not sequential
    image.markSequential()
    #expect(try image.reducedByRows(vertical: 0.5, kernel: .lanczos3) != nil)
    #expect(try image.reducedByRows(vertical: 0.5, kernel: .cubic) == nil)
    #expect(try image.reducedByRows(vertical: 0.5, kernel: .nearest) == nil)
    #expect(try image.reducedByRows(vertical: 1, kernel: .lanczos3) == nil)  // nothing to reduce
    #expect(try image.reducedByRows(vertical: 1.5, kernel: .lanczos3) == nil)
    #expect(try image.reducedByRows(vertical: .nan, kernel: .lanczos3) == nil)
    let sixteen = try ImageDecoder(autoRotate: false).decode(try corpusFile("pngsuite/basn0g16.png")).image
    #expect(try sixteen.reducedByRows(vertical: 0.5, kernel: .lanczos3) == nil)
  }

  /// The decode at `eighths`/8 and its scales from the true extent, as the fused decoder takes them.
  static func scales(_ input: FetchedData, eighths: Int, target: (width: Int, height: Int)) throws -> (
    whole: VipsImage, horizontal: Double, vertical: Double
  ) {
    let header = try DirectJPEGTests.header(input)
    let whole = try #require(DirectJPEG.load(input, header: header, eighths: eighths))
    let extent = (width: Double(header.width * eighths) / 8, height: Double(header.height * eighths) / 8)
    return (whole, Double(target.width) / extent.width, Double(target.height) / extent.height)
  }

  @Test(
    "a JPEG reduced as it decodes resizes to the bytes of the whole decode resized",
    arguments: [(1601, 1203, 1, false), (2725, 2225, 3, false), (1000, 1000, 2, true), (803, 4000, 4, false)])
  func sameAsWholeDecode(width: Int, height: Int, eighths: Int, grey: Bool) throws {
    let input = try DirectJPEGTests.photo(width: width, height: height, grey: grey)
    let header = try DirectJPEGTests.header(input)
    for target in [(width: 150, height: 97), (width: 190, height: 131), (width: 64, height: 300)] {
      let (whole, horizontal, vertical) = try Self.scales(input, eighths: eighths, target: target)
      guard horizontal < 1, vertical < 1 else { continue }
      let reference = try whole.resized(horizontal: horizontal, vertical: vertical, kernel: .lanczos3)
      let rows = try #require(
        DirectJPEG.loadReduced(input, header: header, eighths: eighths, vertical: vertical, kernel: .lanczos3).decoded)
      #expect(rows.width == whole.width && rows.bands == (grey ? 1 : 3))
      let ours = try rows.resized(horizontal: horizontal, vertical: 1, kernel: .lanczos3)
      try Self.expectSame(ours, reference, "\(width)×\(height) at \(eighths)/8 to \(target)")
    }
  }

  @Test("read from the open file with pread, the reduced decode is the one from memory")
  func fromDescriptor() throws {
    let input = try DirectJPEGTests.photo(width: 1200, height: 900)
    let header = try DirectJPEGTests.header(input)
    let directory = NSTemporaryDirectory() + "darkroom-rows-\(getpid())"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let path = try TestImages.write(input.bytes, named: "photo.jpg", in: directory)
    let descriptor = open(path, O_RDONLY | O_CLOEXEC)
    try #require(descriptor >= 0)
    let streamed = FetchedData(source: input.source, bytes: ImageBytes(openFile: descriptor, count: input.bytes.count))
    let fromFile = try #require(
      DirectJPEG.loadReduced(streamed, header: header, eighths: 2, vertical: 0.4, kernel: .lanczos3).decoded)
    let fromMemory = try #require(
      DirectJPEG.loadReduced(input, header: header, eighths: 2, vertical: 0.4, kernel: .lanczos3).decoded)
    try Self.expectSame(fromFile, fromMemory, "pread against memory")
    let cut = FetchedData(source: input.source, bytes: ImageBytes(openFile: dup(descriptor), count: input.bytes.count / 2))
    #expect(Self.outcome(DirectJPEG.loadReduced(cut, header: header, eighths: 2, vertical: 0.4, kernel: .lanczos3)) == "failed")
  }

  /// "image", "declined" or "failed".
  static func outcome(_ decode: DirectJPEG.Outcome<VipsImage>) -> String {
    switch decode {
    case .decoded: "image"
    case .declined: "declined"
    case .failed: "failed"
    }
  }

  @Test("a CMYK or mismatched JPEG is declined; a cut, damaged or killed one fails")
  func declinedFiles() throws {
    let cmyk = try corpusFile("pillow/pil_sample_cmyk.jpg")
    #expect(
      Self.outcome(
        DirectJPEG.loadReduced(cmyk, header: try DirectJPEGTests.header(cmyk), eighths: 4, vertical: 0.5, kernel: .lanczos3))
        == "declined")
    let input = try DirectJPEGTests.photo(width: 800, height: 600)
    let header = try DirectJPEGTests.header(input)
    let cut = FetchedData(source: input.source, bytes: ImageBytes(Array(input.bytes.data.prefix(input.bytes.count * 2 / 3))))
    #expect(Self.outcome(DirectJPEG.loadReduced(cut, header: header, eighths: 2, vertical: 0.5, kernel: .lanczos3)) == "failed")
    var damaged = Array(input.bytes.data)
    for index in damaged.count / 2..<damaged.count / 2 + 64 { damaged[index] = 0xFF }
    let warned = FetchedData(source: input.source, bytes: ImageBytes(damaged))
    #expect(
      Self.outcome(DirectJPEG.loadReduced(warned, header: header, eighths: 2, vertical: 0.5, kernel: .lanczos3)) == "failed")
    let other = try DirectJPEGTests.photo(width: 640, height: 480)
    #expect(
      Self.outcome(DirectJPEG.loadReduced(other, header: header, eighths: 2, vertical: 0.5, kernel: .lanczos3)) == "declined")
    let killed = try DirectJPEGTests.header(input)
    killed.kill()
    #expect(Self.outcome(DirectJPEG.loadReduced(input, header: killed, eighths: 2, vertical: 0.5, kernel: .lanczos3)) == "failed")
    #expect(Self.outcome(DirectJPEG.loadReduced(input, header: header, eighths: 2, vertical: 0.5, kernel: .cubic)) == "declined")
  }

  @Test("the fused decoder reduces rows unless a crop, a colour profile or a thin decode is in the way")
  func fusedDecoderChooses() throws {
    let resizer = Resizer(width: 300, height: 300)
    let fused = ShrinkOnLoadDecoder(decoder: ImageDecoder(), crop: nil, resizer: resizer)
    let large = try DirectJPEGTests.photo(width: 4000, height: 3000)
    let largeHeader = try DirectJPEGTests.header(large)
    let taken = try #require(fused.reducedDecode(large, header: largeHeader, eighths: 1, target: (300, 225)).decoded)
    #expect(taken.image.width == 500 && taken.image.height == 225 && taken.extent == (500, 225))
    // Decoded at 1/8, 400 pixels tall becomes 50: fewer than the 64 that keep the partial edge.
    let thin = try DirectJPEGTests.photo(width: 4000, height: 400)
    #expect(fused.reducedDecode(thin, header: try DirectJPEGTests.header(thin), eighths: 1, target: (300, 30)).decoded == nil)
    // An embedded profile is converted to sRGB before the resize: the rows cannot be reduced first.
    let profiled = try corpusFile("libvips/sample-xyb.jpg")
    let header = try DirectJPEGTests.header(profiled)
    #expect(header.hasICCProfile)
    #expect(fused.reducedDecode(profiled, header: header, eighths: 2, target: (60, 91)).decoded == nil)
    let keeping = ShrinkOnLoadDecoder(decoder: ImageDecoder(convertToSRGB: false), crop: nil, resizer: resizer)
    #expect(keeping.reducedDecode(profiled, header: header, eighths: 2, target: (60, 91)).decoded != nil)
  }

  /// The file the fused decoder and `encoder` make of `input`, with and without the row reduce.
  static func encodedBothWays(_ input: FetchedData, _ resizer: Resizer, _ encoder: ImageEncoder) async throws -> (
    rows: [UInt8], whole: [UInt8]
  ) {
    var fused = ShrinkOnLoadDecoder(decoder: ImageDecoder(), crop: nil, resizer: resizer)
    let rows = try encoder.encode(try await fused.process(input, context: StageContext())).bytes.data
    fused.reducesRows = false
    let whole = try encoder.encode(try await fused.process(input, context: StageContext())).bytes.data
    return (Array(rows), Array(whole))
  }

  @Test(
    "through the fused decoder, PNG and JPEG files are byte for byte those of the whole decode",
    arguments: [(511, 2055), (2725, 2225), (1605, 1203), (4000, 3000)])
  func filesSameAsWhole(width: Int, height: Int) async throws {
    let input = try DirectJPEGTests.photo(width: width, height: height, quality: 85)
    // Found by the attack: 511×2055 to 300×200 has a row on a phase boundary (rows placed ten at
    // a time, as libvips' line cache asks for them); 1605×1203 to 200×30 shrinks the rows by a
    // whole factor and has columns on phase boundaries (PNG saved 128 pixels wide at a time).
    let sizes = [(300, 200, ResizeMode.fit), (300, 210, .stretch), (200, 30, .stretch), (250, 40, .stretch), (720, 588, .fill)]
    for (boxWidth, boxHeight, mode) in sizes {
      let resizer = Resizer(width: boxWidth, height: boxHeight, mode: mode)
      for encoder in [ImageEncoder(.png()), ImageEncoder(.jpeg(quality: 90))] {
        let (rows, whole) = try await Self.encodedBothWays(input, resizer, encoder)
        let same = rows == whole
        #expect(same, "\(width)×\(height) to \(resizer.identifier) as \(encoder.identifier): the files differ")
      }
    }
  }

  @Test("through the pipeline, a large JPEG gives the bytes of its whole decode resized, in every orientation")
  func pipelineSameAsWhole() async throws {
    for orientation in [1, 6] {
      let input = try TestImages.fetched(.jpeg(quality: 90), width: 3001, height: 2001, orientation: orientation)
      let resizer = Resizer(width: 300, height: 300)
      let decoded = try await ShrinkOnLoadDecoder(decoder: ImageDecoder(), crop: nil, resizer: resizer)
        .process(input, context: StageContext())
      // By hand: the whole decode at 1/8, resized in the stored orientation, then turned upright.
      let target = resizer.scaledSize(inputWidth: orientation == 6 ? 2001 : 3001, inputHeight: orientation == 6 ? 3001 : 2001)
      let stored = orientation == 6 ? (width: target.height, height: target.width) : target
      let (whole, horizontal, vertical) = try Self.scales(input, eighths: 1, target: stored)
      var reference = try whole.resized(horizontal: horizontal, vertical: vertical, kernel: .lanczos3)
      // 251 rows × 200 / 250.125 rounds to 201: the resizer crops the extra row, as here.
      reference = try reference.placed(
        inWidth: stored.width, height: stored.height, gravity: .northwest, background: resizer.background)
      if orientation != 1 { reference = try reference.materialized().autorotated() }
      try Self.expectSame(decoded.image, reference, "orientation \(orientation)")
    }
  }
}
