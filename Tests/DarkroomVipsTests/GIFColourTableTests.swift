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

  @Test("the plan: a frame that paints the canvas has its own table, one that does not adds to what shows")
  func planMergesWhatShows() throws {
    let a: [UInt8] = [255, 0, 0, 0, 255, 0]
    let b: [UInt8] = [0, 0, 255, 9, 9, 9]
    func frame(_ colours: [UInt8], covers: Bool, transparent: Int? = nil) -> GIFColourTables.Frame {
      .init(colours: colours, transparentIndex: transparent, coversCanvas: covers)
    }
    let source = GIFColourTables(
      width: 10, height: 10,
      frames: [frame(a, covers: true), frame(b, covers: false), frame(b, covers: true), frame(a, covers: false, transparent: 1)])
    let plan = try #require(GIFTablePlan(source: source, frames: 4, hasAlpha: false))
    #expect(plan.tables == [a, a + b, b, b + [255, 0, 0]] && plan.frameTables == [0, 1, 2, 3])
    #expect(plan.transparent == [-1, -1, -1, -1])
    let alpha = try #require(GIFTablePlan(source: source, frames: 2, hasAlpha: true))
    #expect(alpha.tables == [a + [0, 0, 0], a + b + [0, 0, 0]] && alpha.transparent == [2, 4])
    // More colours than a table holds: no plan (libvips quantises).
    let many: [UInt8] = (0..<200).flatMap { (value: Int) -> [UInt8] in [UInt8(value), 0, 0] }
    let other: [UInt8] = (0..<200).flatMap { (value: Int) -> [UInt8] in [0, UInt8(value), 1] }
    let crowded = GIFColourTables(width: 10, height: 10, frames: [frame(many, covers: true), frame(other, covers: false)])
    #expect(GIFTablePlan(source: crowded, frames: 2, hasAlpha: false) == nil)
    #expect(GIFTablePlan(source: crowded, frames: 1, hasAlpha: false) != nil)
    #expect(GIFTablePlan(source: crowded, frames: 3, hasAlpha: false) == nil, "more frames than the file declares")
  }

  @Test("the table walk reads any prefix or damage of a GIF without reading past it")
  func walkSurvivesDamage() throws {
    let bytes = Self.bands(frames: 3, palettes: [Self.palette]).bytes
    let whole = try #require(GIFColourTables(ImageBytes(bytes)))
    #expect(whole.frames.count == 3 && whole.width == 80 && whole.frames.allSatisfy(\.coversCanvas))
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
    #expect(counter.calls.load(ordering: .relaxed) == 41, "each frame made once as it was read (the first again)")
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
    #expect(counter.calls.load(ordering: .relaxed) == 2, "the stage's first frame, and the first frame again for the JPEG")
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
