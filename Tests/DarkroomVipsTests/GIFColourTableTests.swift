import Darkroom
import DarkroomTesting
import DarkroomVipsTesting
import Synchronization
import Testing

@testable import DarkroomCore
@testable import DarkroomVips

/// A GIF made from a GIF that was only moved, scaled or cut keeps the source's colour tables (as
/// gifsicle does) instead of being quantised again; an animation's frames are made as they are
/// read, one at a time.
@Suite("GIF colour tables and frames made as read")
struct GIFColourTableTests {
  let harness = StageHarness()

  /// 16 colours far apart.
  static let palette: [[UInt8]] = (0..<16).map { (index: Int) -> [UInt8] in
    let red = UInt8(index * 17)
    let green = UInt8(255 - index * 13)
    let blue = UInt8((index * 97) % 256)
    return [red, green, blue]
  }

  /// 80×60, `frames` full frames of vertical bands of palette colours that move a band a frame.
  static func bands(frames: Int = 6, palettes: [[[UInt8]]]? = nil) -> TestGIF {
    var gif = TestGIF(width: 80, height: 60, palette: palette, loop: 0)
    for frame in 0..<frames {
      let indices = (0..<(80 * 60)).map { pixel in UInt8(((pixel % 80) / 10 + frame) % 16) }
      gif.add(
        .init(width: 80, height: 60, indices: indices, delay: 50 + frame * 10, palette: palettes.map { $0[frame % $0.count] }))
    }
    return gif
  }

  static func fetched(_ gif: TestGIF) -> FetchedData {
    FetchedData(source: ImageSource(path: "bands.gif"), bytes: ImageBytes(gif.bytes))
  }

  /// Every distinct RGB colour of every frame of `image`.
  static func colours(_ image: VipsImage) throws -> Set<[UInt8]> {
    var found = Set<[UInt8]>()
    for index in 0..<image.frameCount {
      let frame = try image.frame(index).materialized()
      let bytes = try frame.pixelBytes()
      let bands = frame.bands
      for start in stride(from: 0, to: bytes.count, by: bands) where bands < 4 || bytes[start + 3] > 127 {
        found.insert(Array(bytes[start..<start + 3]))
      }
    }
    return found
  }

  static func distance(_ a: [UInt8], _ b: [UInt8]) -> Int {
    zip(a, b).reduce(0) { total, pair in total + (Int(pair.0) - Int(pair.1)) * (Int(pair.0) - Int(pair.1)) }
  }

  @Test("a GIF resized to GIF keeps the source's colours: every pixel is a palette colour, delays and loop kept")
  func resizedKeepsTheTable() async throws {
    let decoded = try ImageDecoder().decode(Self.fetched(Self.bands()))
    #expect(decoded.gifSource != nil)
    let resized = try await harness.run(Resizer(width: 33, height: 33), on: decoded)
    #expect(resized.gifSource != nil, "a resize keeps the colours the tables hold")
    let encoded = try await harness.run(ImageEncoder(.gif()), on: resized)
    let back = try decodeBack(encoded).image
    #expect(back.frameCount == 6 && back.width == 33 && back.frameHeight == 25)
    #expect(back.frameDelays == (0..<6).map { 50 + $0 * 10 })
    let used = try Self.colours(back)
    let allowed = Set(Self.palette + [[0, 0, 0]])
    #expect(used.isSubset(of: allowed), "\(used.subtracting(allowed).prefix(5))")
    #expect(used.count > 8, "the bands survive")
    // One table for every frame: written once, as the global table.
    let tables = try #require(GIFColourTables(encoded.bytes))
    #expect(tables.frames.count == 6 && Set(tables.frames.map(\.colours)).count == 1)
    // Each pixel is the table colour nearest to the resized pixel (no dithering, no new colours).
    let reference = try resized.image.materialized()
    let (wanted, got) = (try reference.pixelBytes(), try back.pixelBytes())
    let (m, n) = (reference.bands, back.bands)
    var wrong = 0
    for pixel in 0..<(wanted.count / m) {
      let target = Array(wanted[pixel * m..<pixel * m + 3])
      let nearest = allowed.map { Self.distance($0, target) }.min() ?? 0
      if Self.distance(Array(got[pixel * n..<pixel * n + 3]), target) != nearest { wrong += 1 }
    }
    #expect(wanted.count / m == got.count / n && wrong == 0, "\(wrong) pixels are not their nearest table colour")
  }

  @Test("frames with tables of their own keep their own colours")
  func localTablesStayLocal() async throws {
    let reds: [[UInt8]] = (0..<16).map { [UInt8(255 - $0 * 8), UInt8($0 * 4), 0] }
    let blues: [[UInt8]] = (0..<16).map { [0, UInt8($0 * 4), UInt8(255 - $0 * 8)] }
    let decoded = try ImageDecoder().decode(Self.fetched(Self.bands(frames: 4, palettes: [reds, blues])))
    let resized = try await harness.run(Resizer(width: 40, height: 40), on: decoded)
    let encoded = try await harness.run(ImageEncoder(.gif()), on: resized)
    let back = try decodeBack(encoded).image
    #expect(back.frameCount == 4)
    for index in 0..<4 {
      let used = try Self.colours(try back.frame(index))
      let own = Set((index % 2 == 0 ? reds : blues) + [[0, 0, 0]])
      #expect(used.isSubset(of: own), "frame \(index): \(used.subtracting(own).prefix(3))")
    }
  }

  @Test("only stages that move, scale or cut pixels keep the source's tables; others quantise again")
  func whichStagesKeepTheTables() async throws {
    let decoded = try ImageDecoder().decode(Self.fetched(Self.bands()))
    #expect(try await harness.run(Cropper(.box(width: 40, height: 30, gravity: .centre)), on: decoded).gifSource != nil)
    #expect(try await harness.run(Rotator(.quarter), on: decoded).gifSource != nil)
    #expect(try await harness.run(Flipper(.horizontal), on: decoded).gifSource != nil)
    #expect(try await harness.run(Grayscaler(), on: decoded).gifSource == nil)
    #expect(try await harness.run(Modulator(brightness: 1.2), on: decoded).gifSource == nil)
    #expect(try await harness.run(Resizer(width: 100, height: 100, mode: .center), on: decoded).gifSource == nil)
    // Quantised again: a grayscale animation is still written, in greys.
    let grey = try await harness.run(Grayscaler(), on: decoded)
    let back = try decodeBack(try await harness.run(ImageEncoder(.gif()), on: grey)).image
    #expect(back.frameCount == 6)
    #expect(try Self.colours(back).allSatisfy { abs(Int($0[0]) - Int($0[1])) < 3 && abs(Int($0[1]) - Int($0[2])) < 3 })
  }

  static let (red, blue, green, yellow): ([UInt8], [UInt8], [UInt8], [UInt8]) = (
    [255, 0, 0], [0, 0, 255], [0, 255, 0], [255, 255, 0]
  )

  /// GIFs whose frames leave pixels of the frames before showing, or the empty canvas, in ways the
  /// tables alone do not show, each with a table of its own per frame. A GIF made from them
  /// without a change must show exactly what libvips decodes from them.
  static func canvasCases() -> [(name: String, bytes: [UInt8], lenient: Bool)] {
    func gif(_ width: Int, _ height: Int, _ frames: [TestGIF.Frame]) -> [UInt8] {
      var gif = TestGIF(width: width, height: height, palette: [yellow], loop: 0)
      for frame in frames { gif.add(frame) }
      return gif.bytes
    }
    func full(_ colour: [UInt8], _ side: Int = 16, pixels: Int? = nil, disposal: TestGIF.Disposal = .none) -> TestGIF.Frame {
      .init(
        width: side, height: side, indices: Array(repeating: 0, count: pixels ?? side * side), delay: 100,
        disposal: disposal, palette: [colour])
    }
    let patch = TestGIF.Frame(
      x: 4, y: 4, width: 8, height: 8, indices: Array(repeating: 0, count: 64), delay: 100, palette: [green])
    // A graphic control extension of 5 bytes naming a transparent entry: decoders read it.
    var longControl = gif(
      16, 16,
      [
        full(red),
        .init(width: 16, height: 16, indices: Array(repeating: 0, count: 256), delay: 100, transparent: 0, palette: [blue]),
      ])
    if let at = (0..<(longControl.count - 3)).last(where: { longControl[$0] == 0x21 && longControl[$0 + 1] == 0xF9 }) {
      longControl[at + 2] = 5
      longControl.insert(0, at: at + 7)
    }
    return [
      (
        "a covering frame disposed of as 'previous' brings back what it covered",
        gif(16, 16, [full(red), full(blue, disposal: .previous), patch]), false
      ),
      (
        "a covering frame whose data ends early leaves the rest as it was", gif(16, 16, [full(red), full(blue, pixels: 100)]),
        false
      ),
      // libvips refuses a frame without pixels unless decoding leniently, which keeps it.
      ("a covering frame without data leaves everything as it was", gif(16, 16, [full(red), full(blue, pixels: 0)]), true),
      ("a longer control block names a transparent entry", longControl, false),
      (
        "a first frame that does not cover the screen leaves the empty canvas", gif(16, 16, [patch, full(blue, pixels: 256)]),
        false
      ),
      (
        "disposal to the background clears to the background colour", gif(16, 16, [full(red, disposal: .background), patch]),
        false
      ),
      ("a frame past the declared screen grows the canvas", gif(8, 8, [patch, full(blue, 8)]), false),
    ]
  }

  @Test("a GIF written without a change shows what libvips decodes, frame by frame, whatever the frames leave showing")
  func unchangedFramesStayExact() async throws {
    for (name, bytes, lenient) in Self.canvasCases() {
      do { try await checkUnchanged(bytes, name, decoder: ImageDecoder(lenient: lenient)) } catch {
        Issue.record("\(name): \(error)")
      }
    }
  }

  func checkUnchanged(_ bytes: [UInt8], _ name: String, decoder: ImageDecoder) async throws {
    let fetched = FetchedData(source: ImageSource(path: "case.gif"), bytes: ImageBytes(bytes))
    let decoded = try decoder.decode(fetched)
    #expect(decoded.gifSource != nil)
    let encoded = try await harness.run(ImageEncoder(.gif()), on: decoded)
    let back = try decodeBack(encoded).image
    let source = try decoder.decode(fetched).image
    #expect(back.frameCount == source.frameCount, "\(name)")
    for index in 0..<min(back.frameCount, source.frameCount) {
      let (got, wanted) = (try back.frame(index).materialized(), try source.frame(index).materialized())
      let difference = try Self.rgbaDifference(got, wanted)
      #expect(difference == 0, "\(name): frame \(index) differs by \(difference)")
    }
  }

  /// The largest difference of any RGB sample between two images of one size, where both are
  /// opaque (alpha above 127, or no alpha); a pixel opaque in one and not in the other counts 255.
  static func rgbaDifference(_ a: VipsImage, _ b: VipsImage) throws -> Int {
    let (x, y) = (try a.pixelBytes(), try b.pixelBytes())
    let (m, n) = (a.bands, b.bands)
    guard x.count / m == y.count / n else { return 255 }
    var worst = 0
    for pixel in 0..<(x.count / m) {
      let opaqueX = m < 4 || x[pixel * m + 3] > 127
      let opaqueY = n < 4 || y[pixel * n + 3] > 127
      if opaqueX != opaqueY { return 255 }
      guard opaqueX else { continue }
      for band in 0..<3 { worst = max(worst, abs(Int(x[pixel * m + band]) - Int(y[pixel * n + band]))) }
    }
    return worst
  }

  @Test("a center resize pads with a new colour, fused with the decode too: the GIF is quantised")
  func centerPaddingIsQuantised() async throws {
    var gif = TestGIF(width: 8, height: 8, palette: [Self.red, Self.blue], loop: nil)
    gif.add(.init(width: 8, height: 8, indices: (0..<64).map { UInt8($0 / 32) }, delay: 0))
    let resizer = Resizer(width: 16, height: 16, mode: .center, background: [0, 255, 0, 255])
    let fused = try await harness.run(
      ShrinkOnLoadDecoder(decoder: ImageDecoder(), crop: nil, resizer: resizer), on: Self.fetched(gif))
    #expect(fused.gifSource == nil)
    let back = try decodeBack(try await harness.run(ImageEncoder(.gif()), on: fused)).image
    #expect(colour(try back.pixel(x: 0, y: 0), isNear: Self.green))
  }

  @Test("a chain of stages makes each stage's first frame once, and each frame once more when read")
  func chainsMakeFramesOnce() async throws {
    let counters = (0..<6).map { _ in CountingOperation() }
    var image = try ImageDecoder().decode(Self.fetched(Self.bands(frames: 7)))
    for counter in counters { image = try await harness.run(counter, on: image) }
    #expect(counters.map { $0.calls.load(ordering: .relaxed) } == Array(repeating: 1, count: 6))
    let encoded = try await harness.run(ImageEncoder(.gif()), on: image)
    #expect(counters.map { $0.calls.load(ordering: .relaxed) } == Array(repeating: 7, count: 6))
    #expect(try decodeBack(encoded).frameCount == 7)
  }

  @Test("the plan: a frame that paints the canvas has its own table, one that does not adds to what shows")
  func planMergesWhatShows() throws {
    let a: [UInt8] = [255, 0, 0, 0, 255, 0]
    let b: [UInt8] = [0, 0, 255, 9, 9, 9]
    func frame(_ colours: [UInt8], covers: Bool, transparent: Int? = nil, disposal: Int = 0) -> GIFColourTables.Frame {
      .init(colours: colours, transparentIndex: transparent, width: covers ? 10 : 5, height: 10, disposal: disposal)
    }
    func plan(_ frames: [GIFColourTables.Frame], alpha: Bool = false, count: Int? = nil) -> GIFTablePlan? {
      GIFTablePlan(
        source: GIFColourTables(width: 10, height: 10, frames: frames), frames: count ?? frames.count, hasAlpha: alpha,
        canvasWidth: 10, canvasHeight: 10)
    }
    let black: [UInt8] = [0, 0, 0]
    let frames = [
      frame(a, covers: true), frame(b, covers: false), frame(b, covers: true), frame(a, covers: false, transparent: 1),
    ]
    let covered = try #require(plan(frames))
    #expect(covered.tables == [a, a + b, b, b + [255, 0, 0]] && covered.frameTables == [0, 1, 2, 3])
    #expect(covered.transparent == [-1, -1, -1, -1])
    // With alpha the empty canvas is transparent, and every table gets a transparent entry.
    let alpha = try #require(plan(Array(frames.prefix(2)), alpha: true))
    #expect(alpha.tables == [a + black, a + b + black] && alpha.transparent == [2, 4])
    // Without alpha the empty canvas is black: a first frame that does not cover shows it.
    #expect(try #require(plan([frame(b, covers: false)])).tables == [black + b])
    // Disposal 3 brings back what the canvas held before the frame; disposal 2 clears to black.
    let restored = try #require(plan([frame(a, covers: true), frame(b, covers: true, disposal: 3), frame(b, covers: false)]))
    #expect(restored.tables == [a, b, a + b])
    let cleared = try #require(plan([frame(a, covers: true, disposal: 2), frame(b, covers: false)]))
    #expect(cleared.tables == [a, a + black + b])
    // More colours than a table holds: no plan (libvips quantises).
    let many: [UInt8] = (0..<200).flatMap { (value: Int) -> [UInt8] in [UInt8(value), 0, 0] }
    let other: [UInt8] = (0..<200).flatMap { (value: Int) -> [UInt8] in [0, UInt8(value), 1] }
    let crowded = [frame(many, covers: true), frame(other, covers: false)]
    #expect(plan(crowded) == nil)
    #expect(plan(crowded, count: 1) != nil)
    #expect(plan(crowded, count: 3) == nil, "more frames than the file declares")
  }

  @Test("the table walk reads any prefix or damage of a GIF without reading past it")
  func walkSurvivesDamage() throws {
    let bytes = Self.bands(frames: 3, palettes: [Self.palette]).bytes
    let whole = try #require(GIFColourTables(ImageBytes(bytes)))
    #expect(whole.frames.count == 3 && whole.width == 80)
    #expect(whole.frames.allSatisfy { $0.paints(canvasWidth: 80, canvasHeight: 60) })
    for length in stride(from: 0, through: bytes.count, by: 7) {
      let frames = GIFColourTables(ImageBytes(Array(bytes.prefix(length))))?.frames.count ?? 0
      #expect(frames <= 3)
    }
    var flipped = bytes
    for offset in stride(from: 13, to: bytes.count, by: 97) {
      flipped[offset] ^= 0xFF
      _ = GIFColourTables(ImageBytes(flipped))
    }
    #expect(GIFColourTables(ImageBytes(Array("GIF89a".utf8))) == nil)
  }

  @Test("an animation's frames are made as they are read: a stage makes the first, the encoder the rest")
  func framesAreMadeWhenRead() async throws {
    let counter = CountingOperation()
    let decoded = try ImageDecoder().decode(Self.fetched(Self.bands(frames: 40)))
    let flipped = try await harness.run(counter, on: decoded)
    #expect(counter.calls.load(ordering: .relaxed) == 1, "only the first frame is made by the stage")
    let encoded = try await harness.run(ImageEncoder(.gif()), on: flipped)
    #expect(counter.calls.load(ordering: .relaxed) == 40, "each frame made once (the stage's first frame is read as made)")
    #expect(try decodeBack(encoded).frameCount == 40)
    // Read again (a memory copy, twice): the frames are made again, and come out the same.
    let once = try flipped.image.materialized()
    let twice = try flipped.image.materialized()
    #expect(try meanDifference(once, twice) == 0)
  }

  @Test("a still format after a stage of an animation makes only the first frame")
  func stillOutputMakesOneFrame() async throws {
    let counter = CountingOperation()
    let decoded = try ImageDecoder().decode(Self.fetched(Self.bands(frames: 30)))
    let turned = try await harness.run(counter, on: decoded)
    let encoded = try await harness.run(ImageEncoder(.jpeg()), on: turned)
    #expect(encoded.width == 80 && encoded.height == 60)
    #expect(counter.calls.load(ordering: .relaxed) == 1, "the stage's first frame, which the JPEG is made of")
  }

  @Test("a frame that fails when it is made fails the encode with a typed error, not a crash")
  func failingFrameIsAnError() async throws {
    let decoded = try ImageDecoder().decode(Self.fetched(Self.bands(frames: 5)))
    let failing = try await harness.run(CountingOperation(failAfter: 3), on: decoded)
    await #expect(throws: PipelineError.self) { try await harness.run(ImageEncoder(.gif()), on: failing) }
  }
}

/// Flips each frame and counts the frames it was asked for; fails from call `failAfter` on.
final class CountingOperation: PixelOperation {
  static let kind = "counting"
  let calls = Atomic<Int>(0)
  let failAfter: Int
  init(failAfter: Int = .max) { self.failAfter = failAfter }
  var identifier: String { "counting" }
  func apply(to image: VipsImage) throws(PipelineError) -> VipsImage {
    let call = calls.add(1, ordering: .relaxed).newValue
    if call > failAfter { throw PipelineError(.processingFailed, "frame refused on purpose") }
    return try image.flipped(.horizontal)
  }
}

/// GIF files written byte by byte, for what `TestGIF` does not write: tables of any size, control
/// blocks of other sizes or two to a frame, sub-blocks cut short, codes of any width.
enum RawGIF {
  static func word(_ value: Int) -> [UInt8] { [UInt8(value & 0xFF), UInt8(value >> 8 & 0xFF)] }

  /// A table of at least 2 entries and a power of two, and its size bits.
  static func table(_ colours: [[UInt8]]) -> (bytes: [UInt8], bits: UInt8) {
    var bits = 0
    while 2 << bits < colours.count { bits += 1 }
    let entries = 2 << bits
    return ((0..<entries).flatMap { $0 < colours.count ? colours[$0] : [0, 0, 0] }, UInt8(bits))
  }

  static func header(_ width: Int, _ height: Int, global: [[UInt8]], background: UInt8 = 0) -> [UInt8] {
    let (bytes, bits) = table(global)
    return Array("GIF89a".utf8) + word(width) + word(height) + [0x80 | bits, background, 0] + bytes
      + [0x21, 0xFF, 11] + Array("NETSCAPE2.0".utf8) + [3, 1, 0, 0, 0]
  }

  /// A graphic control extension; `size` is what its size byte says (4 in a well-formed file).
  static func control(transparent: UInt8? = nil, disposal: UInt8 = 0, size: UInt8 = 4) -> [UInt8] {
    let fields: [UInt8] = [disposal << 2 | (transparent == nil ? 0 : 1), 10, 0, transparent ?? 0]
    return [0x21, 0xF9, size] + (0..<Int(size)).map { $0 < fields.count ? fields[$0] : 0 } + [0]
  }

  /// An image descriptor, its local table, the code size and `data` in sub-blocks of `chunk`.
  static func image(
    _ x: Int, _ y: Int, _ width: Int, _ height: Int, local: [[UInt8]]? = nil, codeSize: Int, data: [UInt8], chunk: Int = 255
  ) -> [UInt8] {
    var out = [0x2C] + word(x) + word(y) + word(width) + word(height)
    if let local {
      let (bytes, bits) = table(local)
      out += [0x80 | bits] + bytes
    } else {
      out.append(0)
    }
    out.append(UInt8(codeSize))
    var offset = 0
    while offset < data.count {
      let count = min(chunk, data.count - offset)
      out += [UInt8(count)] + data[offset..<offset + count]
      offset += count
    }
    return out + [0]
  }

  /// Codes of the given widths packed least significant bit first.
  static func pack(_ codes: [(code: Int, bits: Int)]) -> [UInt8] {
    var (out, buffer, held) = ([UInt8](), 0, 0)
    for (code, bits) in codes {
      buffer |= code << held
      held += bits
      while held >= 8 {
        out.append(UInt8(buffer & 0xFF))
        buffer >>= 8
        held -= 8
      }
    }
    return held > 0 ? out + [UInt8(buffer & 0xFF)] : out
  }

  /// `indices` as literal codes, a clear code before the table would need wider codes, and the
  /// end code.
  static func literals(_ indices: [Int], codeSize minimum: Int) -> [UInt8] {
    let (clear, width) = (1 << minimum, minimum + 1)
    let run = (1 << width) - clear - 2
    var codes: [(code: Int, bits: Int)] = []
    for (count, index) in indices.enumerated() {
      if count % run == 0 { codes.append((clear, width)) }
      codes.append((index, width))
    }
    return pack(codes + [(clear + 1, width)])
  }
}

extension GIFColourTableTests {
  static let (white, cyan, magenta): ([UInt8], [UInt8], [UInt8]) = ([255, 255, 255], [0, 255, 255], [255, 0, 255])

  /// Files where libnsgif draws what the tables and rectangles alone do not say.
  static func decoderCases() -> [(name: String, bytes: [UInt8])] {
    let red = Self.red
    let all = Array(repeating: 0, count: 64)
    let redFrame = RawGIF.control() + RawGIF.image(0, 0, 8, 8, codeSize: 2, data: RawGIF.literals(all, codeSize: 2))
    var truncated = RawGIF.header(8, 8, global: [red, white]) + redFrame + RawGIF.control()
    // The second frame's data in one sub-block that says 255 bytes and ends with the file.
    let data = RawGIF.literals(Array(repeating: 1, count: 64), codeSize: 2)
    truncated += RawGIF.image(0, 0, 8, 8, local: [Self.green, Self.blue], codeSize: 2, data: []).dropLast(1) + [255] + data
    // 16 pixels as [clear, 1, 1] × 8 in 3-bit codes: exactly 9 bytes and no end code.
    let exact = RawGIF.pack(Array(repeating: [(4, 3), (1, 3), (1, 3)], count: 8).flatMap { $0 })
    return [
      ("a sub-block that runs past the end of the file is not drawn", truncated),
      (
        "a frame drawing indices past its table",
        RawGIF.header(8, 8, global: [red, Self.green]) + RawGIF.control()
          + RawGIF.image(
            0, 0, 8, 8, codeSize: 2,
            data: RawGIF.literals(Array(repeating: 0, count: 32) + Array(repeating: 3, count: 32), codeSize: 2))
          + [0x3B]
      ),
      (
        "a frame past its local table shows the larger local table before",
        RawGIF.header(8, 8, global: [[0, 0, 0], white]) + RawGIF.control()
          + RawGIF.image(
            0, 0, 8, 8, local: [Self.yellow, Self.cyan, Self.magenta, white], codeSize: 2,
            data: RawGIF.literals((0..<64).map { $0 % 4 }, codeSize: 2))
          + RawGIF.control()
          + RawGIF.image(
            0, 0, 8, 8, local: [red, Self.green], codeSize: 2, data: RawGIF.literals((0..<64).map { $0 / 16 }, codeSize: 2))
          + [0x3B]
      ),
      (
        "two control blocks before one frame: transparency stays on",
        RawGIF.header(8, 8, global: [red, white]) + redFrame + RawGIF.control(transparent: 2) + RawGIF.control()
          + RawGIF.image(
            0, 0, 8, 8, local: [Self.green, Self.blue, Self.yellow, white], codeSize: 2,
            data: RawGIF.literals(Array(repeating: 1, count: 32) + Array(repeating: 2, count: 32), codeSize: 2))
          + [0x3B]
      ),
      (
        "a control block of 3 bytes still names a transparent entry",
        RawGIF.header(8, 8, global: [red, white]) + redFrame + RawGIF.control(transparent: 0, size: 3)
          + RawGIF.image(
            0, 0, 8, 8, local: [Self.green, Self.blue], codeSize: 2,
            data: RawGIF.literals(Array(repeating: 0, count: 32) + Array(repeating: 1, count: 32), codeSize: 2))
          + [0x3B]
      ),
      (
        "a still with a transparent entry stays transparent",
        RawGIF.header(8, 8, global: [red, white]) + RawGIF.control(transparent: 1)
          + RawGIF.image(
            0, 0, 8, 8, codeSize: 2,
            data: RawGIF.literals(Array(repeating: 0, count: 8) + Array(repeating: 1, count: 56), codeSize: 2))
          + [0x3B]
      ),
      (
        "a last code that ends on the last bit of the last sub-block is dropped",
        RawGIF.header(4, 4, global: [red, white]) + RawGIF.control()
          + RawGIF.image(0, 0, 4, 4, codeSize: 2, data: RawGIF.literals(Array(repeating: 0, count: 16), codeSize: 2))
          + RawGIF.control() + RawGIF.image(0, 0, 4, 4, local: [Self.blue, Self.green], codeSize: 2, data: exact) + [0x3B]
      ),
    ]
  }

  @Test("files where the decoder draws what the blocks alone do not say come out as libvips decodes them")
  func decoderQuirksStayExact() async throws {
    for (name, bytes) in Self.decoderCases() {
      do { try await checkUnchanged(bytes, name, decoder: ImageDecoder(lenient: true)) } catch {
        Issue.record("\(name): \(error)")
      }
    }
  }
}

/// SplitMix64: the same numbers on every run.
struct SeededNumbers {
  var state: UInt64
  mutating func next(_ bound: Int) -> Int {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return Int((z ^ (z >> 31)) % UInt64(max(1, bound)))
  }
}

extension GIFColourTableTests {
  /// A GIF of random frames: rectangles inside and past the screen, local tables or not, every
  /// disposal, transparent entries, data cut short, sub-blocks of any length.
  static func randomGIF(_ numbers: inout SeededNumbers) -> [UInt8] {
    let colours: [[UInt8]] = [Self.red, Self.green, Self.blue, Self.white, [0, 0, 0], Self.yellow, Self.cyan, Self.magenta]
    func table(_ count: Int) -> [[UInt8]] { (0..<count).map { _ in colours[numbers.next(colours.count)] } }
    let (width, height) = (1 + numbers.next(10), 1 + numbers.next(10))
    let global = table([2, 4, 8][numbers.next(3)])
    var bytes = RawGIF.header(width, height, global: global, background: UInt8(numbers.next(5)))
    for _ in 0..<(2 + numbers.next(4)) {
      let covers = numbers.next(2) == 0
      let (x, y) = covers ? (0, 0) : (numbers.next(width), numbers.next(height))
      let (w, h) = covers ? (width, height) : (1 + numbers.next(width), 1 + numbers.next(height))
      let local = numbers.next(2) == 0 ? table([2, 4][numbers.next(2)]) : nil
      let entries = local?.count ?? global.count
      let transparent = numbers.next(3) == 0 ? UInt8(numbers.next(entries)) : nil
      bytes += RawGIF.control(transparent: transparent, disposal: UInt8(numbers.next(5)))
      let pixels = numbers.next(4) == 0 ? numbers.next(w * h) : w * h
      let data = RawGIF.literals((0..<pixels).map { _ in numbers.next(entries) }, codeSize: 2)
      bytes += RawGIF.image(x, y, w, h, local: local, codeSize: 2, data: data, chunk: [255, 1, 2, 7][numbers.next(4)])
    }
    return bytes + [0x3B]
  }

  @Test("random GIFs written unchanged come out as libvips decodes them, frame by frame")
  func randomGIFsStayExact() async throws {
    var numbers = SeededNumbers(state: 17)
    var compared = 0
    for index in 0..<150 {
      let bytes = Self.randomGIF(&numbers)
      // Files libvips cannot decode at all (a first frame without pixels) have nothing to compare.
      let fetched = FetchedData(source: ImageSource(path: "random.gif"), bytes: ImageBytes(bytes))
      guard (try? ImageDecoder(lenient: true).decode(fetched).image.materialized()) != nil else { continue }
      compared += 1
      do { try await checkUnchanged(bytes, "random GIF \(index)", decoder: ImageDecoder(lenient: true)) } catch {
        Issue.record("random GIF \(index): \(error)")
      }
    }
    #expect(compared > 100, "only \(compared) of 150 random GIFs decode")
  }
}
