import Darkroom
import DarkroomTesting
import DarkroomVipsTesting
import Testing

/// The `overlay` stage: a watermark's pixels sit where its gravity, offset, scale or tiling put
/// them, faded by its opacity.
@Suite("Overlay")
struct OverlayTests {
  let harness = StageHarness()
  typealias Q = TestImages.Quadrant

  /// A 20×10 watermark of four quadrants (red, green / blue, white).
  func watermark() throws -> DecodedImage {
    try ImageDecoder().decode(try TestImages.fetched(.png(), width: 20, height: 10, quadrants: true))
  }

  /// A 200×100 gradient (no alpha, or with it).
  func base(alpha: Bool = false) throws -> DecodedImage {
    let decoded = try ImageDecoder().decode(try TestImages.fetched(.png(), width: 200, height: 100, alpha: alpha))
    return decoded.with(try decoded.image.materialized())
  }

  func pixel(_ image: DecodedImage, _ x: Int, _ y: Int) throws -> [UInt8] {
    try image.image.materialized().pixel(x: x, y: y)
  }

  @Test("gravity and offsets: moved in from the edges the gravity names")
  func placement() async throws {
    let base = try base()
    let southeast = try await harness.run(
      try Overlay(watermark: watermark(), identity: "q", gravity: .southeast, x: 5, y: 5), on: base)
    #expect(southeast.width == 200 && southeast.height == 100 && southeast.image.bands == 3)
    // Origin (175, 85): red from (175, 85), white from (185, 90) to (194, 94).
    #expect(try pixel(southeast, 177, 87) == Q.red)
    #expect(try pixel(southeast, 192, 93) == Q.white)
    #expect(try pixel(southeast, 196, 97) == (try pixel(base, 196, 97)), "outside the watermark the image is as it was")
    let northwest = try await harness.run(
      try Overlay(watermark: watermark(), identity: "q", gravity: .northwest, x: 3, y: 4), on: base)
    #expect(try pixel(northwest, 4, 5) == Q.red && (try pixel(northwest, 2, 5)) == (try pixel(base, 2, 5)))
    let centre = try await harness.run(try Overlay(watermark: watermark(), identity: "q", gravity: .centre), on: base)
    #expect(try pixel(centre, 91, 46) == Q.red && (try pixel(centre, 108, 53)) == Q.white)
  }

  @Test("opacity blends the watermark with what is under it; 0 leaves the image as it was")
  func opacity() async throws {
    let base = try base()
    let half = try await harness.run(try Overlay(watermark: watermark(), identity: "q", x: 5, y: 5, opacity: 0.5), on: base)
    let under = try pixel(base, 177, 87)
    let expected = zip(Q.red, under).map { UInt8((Double($0) + Double($1)) / 2) }
    let blended = try pixel(half, 177, 87)
    #expect(colour(blended, isNear: expected, tolerance: 3), "\(blended) vs \(expected)")
    let none = try await harness.run(try Overlay(watermark: watermark(), identity: "q", x: 5, y: 5, opacity: 0), on: base)
    let unchanged = try pixel(none, 177, 87)
    #expect(unchanged == under, "\(unchanged) vs \(under)")
  }

  @Test("scale sizes the watermark against the image's width; tile repeats it over all of it")
  func scaleAndTile() async throws {
    let base = try base()
    let scaled = try await harness.run(
      try Overlay(watermark: watermark(), identity: "q", gravity: .southeast, scale: 0.5), on: base)
    // 100×50 at (100, 50): red at its top-left, white at its bottom-right.
    let (topLeft, bottomRight) = (try pixel(scaled, 110, 60), try pixel(scaled, 190, 90))
    #expect(colour(topLeft, isNear: Q.red, tolerance: 8) && colour(bottomRight, isNear: Q.white, tolerance: 8))
    #expect(try pixel(scaled, 90, 60) == (try pixel(base, 90, 60)))
    let tiled = try await harness.run(try Overlay(watermark: watermark(), identity: "q", tile: true), on: base)
    for (x, y) in [(2, 2), (42, 32), (182, 92), (122, 2)] { #expect(try pixel(tiled, x, y) == Q.red, "(\(x), \(y))") }
    for (x, y) in [(17, 7), (197, 97)] { #expect(try pixel(tiled, x, y) == Q.white, "(\(x), \(y))") }
  }

  @Test("an image with alpha keeps it; a watermark larger than the image is cut at its edges")
  func alphaAndLarge() async throws {
    let withAlpha = try await harness.run(try Overlay(watermark: watermark(), identity: "q"), on: try base(alpha: true))
    #expect(withAlpha.image.bands == 4)
    let large = try ImageDecoder().decode(try TestImages.fetched(.png(), width: 400, height: 300, quadrants: true))
    let cut = try await harness.run(try Overlay(watermark: large, identity: "big", gravity: .northwest), on: try base())
    let corner = try pixel(cut, 199, 99)
    #expect(cut.width == 200 && cut.height == 100 && corner == Q.red)
  }

  @Test("a tall, narrow watermark scaled to a wide image is cut to the image first; one pushed wholly outside changes nothing")
  func extremes() async throws {
    // 1×3000 scaled to a 3000-pixel-wide image would be 3000×9,000,000 (libvips aborted past 2^31 rows).
    let tall = try ImageDecoder().decode(try TestImages.fetched(.png(), width: 1, height: 3000))
    let wide = try ImageDecoder().decode(try TestImages.fetched(.png(), width: 3000, height: 10))
    let covered = try await harness.run(try Overlay(watermark: tall, identity: "tall", gravity: .northwest, scale: 1), on: wide)
    #expect(covered.width == 3000 && covered.height == 10)
    let base = try base()
    let away = try await harness.run(try Overlay(watermark: watermark(), identity: "q", gravity: .northwest, x: 65_535), on: base)
    #expect(try meanDifference(away.image.materialized(), base.image) == 0)
  }

  @Test("options out of range are refused, saying what is allowed")
  func refused() throws {
    for (opacity, scale, x) in [(1.5, nil, 0), (-0.1, nil, 0), (Double.nan, nil, 0), (1, 0.0, 0), (1, 2.0, 0), (1, nil, 70_000)]
      as [(Double, Double?, Int)]
    {
      let error = #expect(throws: PipelineError.self) {
        _ = try Overlay(watermark: watermark(), identity: "q", x: x, opacity: opacity, scale: scale)
      }
      #expect(error?.code == .invalidInput)
    }
  }
}
