import Darkroom
import DarkroomTesting
import DarkroomVipsTesting
import Testing

/// The pixel operations (rotate, flip, grayscale, blur, sharpen), checked by their pixels on
/// images the tests make.
@Suite("Pixel operations")
struct OperationTests {
  let harness = StageHarness()
  /// 400×200: red top-left, green top-right, blue bottom-left, white bottom-right.
  let quadrants: DecodedImage

  init() throws {
    let decoded = try ImageDecoder().decode(try TestImages.fetched(.png(), width: 400, height: 200, quadrants: true))
    quadrants = decoded.with(try decoded.image.materialized())
  }

  /// The colours at the four corners (top-left, top-right, bottom-left, bottom-right), 5 pixels in.
  func corners(_ image: DecodedImage) throws -> [[UInt8]] {
    let pixels = try image.image.materialized()
    let (w, h) = (pixels.width, pixels.height)
    return try [(5, 5), (w - 6, 5), (5, h - 6), (w - 6, h - 6)].map { try pixels.pixel(x: $0.0, y: $0.1) }
  }

  typealias Q = TestImages.Quadrant

  @Test("rotate turns clockwise: the size swaps for quarter turns and each corner moves on")
  func rotate() async throws {
    let quarter = try await harness.run(Rotator(.quarter), on: quadrants)
    #expect([quarter.width, quarter.height] == [200, 400])
    #expect(try corners(quarter) == [Q.blue, Q.red, Q.white, Q.green])
    let half = try await harness.run(Rotator(.half), on: quadrants)
    #expect([half.width, half.height] == [400, 200])
    #expect(try corners(half) == [Q.white, Q.blue, Q.green, Q.red])
    let threeQuarters = try await harness.run(Rotator(.threeQuarters), on: quadrants)
    #expect(try corners(threeQuarters) == [Q.green, Q.white, Q.red, Q.blue])
  }

  @Test("flip mirrors left and right, top and bottom, or both")
  func flip() async throws {
    #expect(try corners(try await harness.run(Flipper(.horizontal), on: quadrants)) == [Q.green, Q.red, Q.white, Q.blue])
    #expect(try corners(try await harness.run(Flipper(.vertical), on: quadrants)) == [Q.blue, Q.white, Q.red, Q.green])
    #expect(try corners(try await harness.run(Flipper(.both), on: quadrants)) == [Q.white, Q.blue, Q.green, Q.red])
  }

  @Test("grayscale leaves one band of luminance (white stays white), and keeps alpha")
  func grayscale() async throws {
    let grey = try await harness.run(Grayscaler(), on: quadrants)
    #expect(grey.image.bands == 1)
    let values = try corners(grey).map { $0[0] }
    #expect(values[3] >= 254)  // white
    #expect(values[1] > values[0] && values[0] > values[2])  // green is brighter than red, red than blue
    let alpha = try VipsImage.fromPixels([255, 0, 0, 128, 0, 0, 255, 255], width: 2, height: 1, bands: 4)
    let withAlpha = DecodedImage(source: ImageSource("memory"), image: alpha, sourceFormat: .png, sourceWidth: 2, sourceHeight: 1)
    let greyAlpha = try await harness.run(Grayscaler(), on: withAlpha)
    #expect(greyAlpha.image.bands == 2)
    #expect(try greyAlpha.image.pixel(x: 0, y: 0)[1] == 128)
  }

  @Test("blur softens an edge, more with a larger sigma; transparent pixels lend it no colour")
  func blur() async throws {
    // Black, with a white right half: across the edge, a blur makes greys.
    var pixels = [UInt8](repeating: 0, count: 40 * 10)
    for y in 0..<10 { for x in 20..<40 { pixels[y * 40 + x] = 255 } }
    let edge = DecodedImage(
      source: ImageSource("memory"), image: try VipsImage.fromPixels(pixels, width: 40, height: 10, bands: 1), sourceFormat: .png,
      sourceWidth: 40, sourceHeight: 10)
    let soft = try await harness.run(Blurrer(sigma: 1), on: edge).image.materialized()
    let softer = try await harness.run(Blurrer(sigma: 4), on: edge).image.materialized()
    let near = try soft.pixel(x: 19, y: 5)[0]  // libvips cuts its mask where it is under 0.2: ±1 pixel at sigma 1
    #expect(near > 0 && near < 128)
    #expect(try softer.pixel(x: 14, y: 5)[0] > soft.pixel(x: 14, y: 5)[0])
    #expect(try soft.pixel(x: 2, y: 5)[0] == 0 && soft.pixel(x: 37, y: 5)[0] == 255)
    // Transparent red beside opaque blue: the half-transparent pixels the blur makes are blue.
    var rgba = [UInt8]()
    for _ in 0..<10 { for x in 0..<40 { rgba += x < 20 ? [255, 0, 0, 0] : [0, 0, 255, 255] } }
    let layered = DecodedImage(
      source: ImageSource("memory"), image: try VipsImage.fromPixels(rgba, width: 40, height: 10, bands: 4), sourceFormat: .png,
      sourceWidth: 40, sourceHeight: 10)
    let blended = try await harness.run(Blurrer(sigma: 2), on: layered).image.materialized()
    let fringe = try blended.pixel(x: 18, y: 5)
    #expect(fringe[3] > 0 && fringe[3] < 255 && fringe[0] < 8 && fringe[2] > 240, "\(fringe)")
  }

  @Test("sharpen steepens an edge: darker on its dark side, lighter on its light side; amount 0 changes nothing")
  func sharpen() async throws {
    var pixels = [UInt8](repeating: 100, count: 40 * 10 * 3)
    for y in 0..<10 { for x in 20..<40 { for band in 0..<3 { pixels[(y * 40 + x) * 3 + band] = 160 } } }
    let step = DecodedImage(
      source: ImageSource("memory"), image: try VipsImage.fromPixels(pixels, width: 40, height: 10, bands: 3), sourceFormat: .png,
      sourceWidth: 40, sourceHeight: 10)
    let sharp = try await harness.run(Sharpener(sigma: 1, amount: 3), on: step).image.materialized()
    #expect(try sharp.pixel(x: 19, y: 5)[0] < 100)
    #expect(try sharp.pixel(x: 20, y: 5)[0] > 160)
    #expect(try sharp.pixel(x: 2, y: 5)[0] == 100)
    let same = try await harness.run(Sharpener(sigma: 1, amount: 0), on: step)
    #expect(same.image === step.image)
  }

  @Test("a blur's sigma out of range is refused, saying what is allowed", arguments: [0.0, -1, .nan, .infinity, 100.5])
  func refusedBlur(_ sigma: Double) throws {
    let error = #expect(throws: PipelineError.self) { try quadrants.image.blurred(sigma: sigma) }
    #expect(error?.code == .invalidInput && error?.message.contains("at most 100") == true)
  }

  @Test(
    "a sharpen's sigma or amount out of range is refused, saying what is allowed",
    arguments: [(0.0, 1.0), (11, 1), (.nan, 1), (1, -1), (1, 21), (1, .nan)])
  func refusedSharpen(_ sigma: Double, _ amount: Double) throws {
    let error = #expect(throws: PipelineError.self) { try quadrants.image.sharpened(sigma: sigma, amount: amount) }
    #expect(error?.code == .invalidInput && error?.message.contains("sharpen") == true)
  }

  @Test("flatten composes alpha over its colour and drops the alpha band")
  func flatten() async throws {
    let image = try VipsImage.fromPixels([255, 0, 0, 128, 0, 0, 255, 255, 0, 0, 0, 0], width: 3, height: 1, bands: 4)
    let input = DecodedImage(source: ImageSource("memory"), image: image, sourceFormat: .png, sourceWidth: 3, sourceHeight: 1)
    let flat = try await harness.run(Flattener(background: [255, 255, 255]), on: input).image.materialized()
    #expect(flat.bands == 3)
    #expect(colour(try flat.pixel(x: 0, y: 0), isNear: [255, 127, 127], tolerance: 2))  // half red over white
    #expect(try flat.pixel(x: 1, y: 0) == [0, 0, 255])
    #expect(try flat.pixel(x: 2, y: 0) == [255, 255, 255])
    #expect(try await harness.run(Flattener(), on: quadrants).image === quadrants.image)  // no alpha: unchanged
  }

  @Test("extend pads each side with its colour; a colour that is not opaque adds alpha")
  func extend() async throws {
    let padded = try await harness.run(
      Extender(top: 10, right: 20, bottom: 30, left: 40, background: [0, 255, 0, 255]), on: quadrants)
    #expect([padded.width, padded.height] == [460, 240])
    let pixels = try padded.image.materialized()
    #expect(try pixels.pixel(x: 0, y: 0) == Q.green)
    #expect(try pixels.pixel(x: 45, y: 15) == Q.red)
    #expect(try pixels.pixel(x: 459, y: 239) == Q.green)
    #expect(try pixels.pixel(x: 435, y: 205) == Q.white)
    let clear = try await harness.run(Extender(left: 5, background: [0, 0, 0, 0]), on: quadrants).image.materialized()
    #expect(clear.bands == 4)
    #expect(try clear.pixel(x: 2, y: 2)[3] == 0 && clear.pixel(x: 7, y: 2) == Q.red + [255])
    let tooWide = await #expect(throws: PipelineError.self) {
      _ = try await harness.run(Extender(left: VipsImage.maxExtendedSide, background: [0, 0, 0, 255]), on: quadrants)
    }
    #expect(tooWide?.code == .imageTooLarge && tooWide?.message.contains("65535") == true)
    let negative = #expect(throws: PipelineError.self) {
      try quadrants.image.extended(top: -1, right: 0, bottom: 0, left: 0, background: [0, 0, 0, 255])
    }
    #expect(negative?.code == .invalidInput)
  }

  /// `width`×`height` of `border`, with a `box` of `inside` at `x`, `y`.
  func framed(width: Int, height: Int, border: [UInt8], box: (x: Int, y: Int, width: Int, height: Int), inside: [UInt8])
    throws -> DecodedImage
  {
    var pixels: [UInt8] = []
    for y in 0..<height {
      for x in 0..<width {
        let within = x >= box.x && x < box.x + box.width && y >= box.y && y < box.y + box.height
        pixels += within ? inside : border
      }
    }
    let image = try VipsImage.fromPixels(pixels, width: width, height: height, bands: border.count)
    return DecodedImage(source: ImageSource("memory"), image: image, sourceFormat: .png, sourceWidth: width, sourceHeight: height)
  }

  @Test("trim keeps what differs from the border: by the top-left pixel, the bottom-right one, or a colour")
  func trim() async throws {
    let framed = try framed(width: 100, height: 80, border: [255, 255, 255], box: (30, 40, 20, 10), inside: Q.red)
    for trimmer in [Trimmer(), Trimmer(corner: .bottomRight), Trimmer(background: [255, 255, 255])] {
      let trimmed = try await harness.run(trimmer, on: framed)
      #expect([trimmed.width, trimmed.height] == [20, 10], "\(trimmer.identifier)")
      #expect(try trimmed.image.pixel(x: 10, y: 5) == Q.red)
    }
    // Told the border is red, the white all around is content: nothing is removed.
    #expect(try await harness.run(Trimmer(background: [255, 0, 0]), on: framed).width == 100)
    // All border: returned whole.
    let blank = try self.framed(width: 10, height: 10, border: [9, 9, 9], box: (0, 0, 0, 0), inside: [9, 9, 9])
    #expect(try await harness.run(Trimmer(), on: blank).width == 10)
    // Through JPEG: its blocks smear red's colour a few pixels out, past the default threshold,
    // and a larger one trims to the box.
    let jpeg = try decodeBack(try ImageEncoder(.jpeg(quality: 75)).encode(framed)).materializedForTest()
    let loose = try await harness.run(Trimmer(), on: jpeg)
    #expect((20...40).contains(loose.width) && (10...30).contains(loose.height), "\(loose.width)x\(loose.height)")
    let tight = try await harness.run(Trimmer(threshold: 80), on: jpeg)
    #expect(abs(tight.width - 20) <= 4 && abs(tight.height - 10) <= 4, "\(tight.width)x\(tight.height)")
  }

  @Test("trim finds a transparent border (alpha flattened onto white to look) and keeps the alpha")
  func trimAlpha() async throws {
    let framed = try framed(width: 40, height: 30, border: [0, 0, 0, 0], box: (5, 6, 10, 12), inside: [0, 0, 255, 255])
    let trimmed = try await harness.run(Trimmer(), on: framed)
    #expect([trimmed.width, trimmed.height, trimmed.image.bands] == [10, 12, 4])
    let refused = #expect(throws: PipelineError.self) { try framed.image.trimmed(threshold: 256) }
    #expect(refused?.code == .invalidInput)
  }

  @Test("modulate: brightness darkens or lightens, saturation 0 is grey, a half turn of hue makes red cyan; alpha and grey kept")
  func modulate() async throws {
    let colours = try VipsImage.fromPixels([200, 40, 40, 255, 100, 100, 100, 128], width: 2, height: 1, bands: 4)
    let input = DecodedImage(source: ImageSource("memory"), image: colours, sourceFormat: .png, sourceWidth: 2, sourceHeight: 1)
    let darker = try await harness.run(Modulator(brightness: 0.5), on: input).image.materialized()
    #expect(try darker.pixel(x: 1, y: 0)[0] < 60 && darker.pixel(x: 1, y: 0)[3] == 128)
    let grey = try await harness.run(Modulator(saturation: 0), on: input).image.materialized()
    let red = try grey.pixel(x: 0, y: 0)
    #expect(abs(Int(red[0]) - Int(red[1])) <= 3 && abs(Int(red[1]) - Int(red[2])) <= 3, "\(red)")
    let turned = try await harness.run(Modulator(hue: 180), on: input).image.materialized()
    let cyan = try turned.pixel(x: 0, y: 0)
    #expect(cyan[1] > cyan[0] && cyan[2] > cyan[0], "\(cyan)")
    let greyInput = try await harness.run(Grayscaler(), on: quadrants)
    #expect(try await harness.run(Modulator(brightness: 1.2, saturation: 2), on: greyInput).image.bands == 1)
    #expect(try await harness.run(Modulator(), on: input).image === input.image)
    for (b, s, h) in [(-1.0, 1.0, 0.0), (11, 1, 0), (1, .nan, 0), (1, 1, 400), (1, 1, .infinity)] {
      let error = #expect(throws: PipelineError.self) { try colours.modulated(brightness: b, saturation: s, hue: h) }
      #expect(error?.code == .invalidInput)
    }
  }

  @Test("round makes the corners transparent and keeps the middle; a circle fills a square; alpha already there is kept")
  func round() async throws {
    let corners = try await harness.run(Rounder(radius: 30), on: quadrants).image.materialized()
    #expect(corners.bands == 4)
    #expect(try corners.pixel(x: 0, y: 0)[3] == 0 && corners.pixel(x: 399, y: 199)[3] == 0)
    #expect(try corners.pixel(x: 35, y: 2)[3] == 255)  // along the top edge, past the corner
    #expect(try corners.pixel(x: 100, y: 50) == Q.red + [255])
    let edge = try corners.pixel(x: 8, y: 8)[3]  // on the arc (30.4 pixels from its centre): partly covered
    #expect(edge > 0 && edge < 255, "\(edge)")
    let square = try VipsImage.fromPixels([UInt8](repeating: 200, count: 100 * 100), width: 100, height: 100, bands: 1)
    let disc = try square.rounded(rx: nil).materialized()
    #expect(disc.bands == 2)
    #expect(try disc.pixel(x: 8, y: 8)[1] == 0 && disc.pixel(x: 50, y: 50) == [200, 255] && disc.pixel(x: 2, y: 50)[1] == 255)
    // Transparent already: stays transparent inside the shape.
    let clear = try VipsImage.fromPixels([UInt8](repeating: 0, count: 20 * 20 * 4), width: 20, height: 20, bands: 4)
    #expect(try clear.rounded(rx: 5).materialized().pixel(x: 10, y: 10)[3] == 0)
    let elliptic = try await harness.run(Rounder(radius: 10, verticalRadius: 40), on: quadrants).image.materialized()
    #expect(
      try elliptic.pixel(x: 1, y: 1)[3] == 0 && elliptic.pixel(x: 12, y: 2)[3] == 255 && elliptic.pixel(x: 0, y: 5)[3] == 0)
    #expect(try quadrants.image.rounded(rx: 0) === quadrants.image)
    let refused = #expect(throws: PipelineError.self) { try quadrants.image.rounded(rx: -1) }
    #expect(refused?.code == .invalidInput)
  }

  @Test("sharpen keeps 16-bit alpha exactly (libvips alone cut it to multiples of 256)")
  func sharpenSixteenBitAlpha() async throws {
    let decoded = try ImageDecoder().decode(try corpusFile("pngsuite/basn6a16.png")).materializedForTest()
    #expect(decoded.image.bytesPerPixel == 8)
    let sharp = try await harness.run(Sharpener(sigma: 1, amount: 2), on: decoded).image.materialized()
    let (before, after) = (try decoded.image.pixelBytes(), try sharp.pixelBytes())
    #expect(before.count == after.count && sharp.bytesPerPixel == 8)
    let alpha = { (bytes: [UInt8]) in stride(from: 6, to: bytes.count, by: 8).map { [bytes[$0], bytes[$0 + 1]] } }
    #expect(alpha(before) == alpha(after))
  }

  @Test("a convolution's output is marked, so that the next convolution works from it in memory")
  func convolutionsHoldTheirInput() async throws {
    let blurred = try quadrants.image.blurred(sigma: 2)
    #expect(blurred.isConvolved && !quadrants.image.isConvolved)
    // Marks pass to what derives from a convolution; a chain of them still renders right.
    #expect(try blurred.rotated(by: .half).isConvolved)
    var chain = quadrants.image
    for _ in 0..<12 { chain = try chain.sharpened(sigma: 1, amount: 1) }
    #expect(chain.width == 400 && chain.isConvolved)
    #expect(colour(try chain.materialized().pixel(x: 100, y: 50), isNear: Q.red, tolerance: 3))
  }
}
