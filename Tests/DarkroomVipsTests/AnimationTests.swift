import Darkroom
import DarkroomTesting
import DarkroomVipsTesting
import Testing

/// Animated GIFs and WebPs the tests write themselves: every frame cropped, resized and fitted
/// alike, delays and loop count kept, sub-frames, disposal and transparency composed.
@Suite("Animation")
struct AnimationTests {
  let harness = StageHarness()
  static let (red, blue, green, white): ([UInt8], [UInt8], [UInt8], [UInt8]) = (
    [255, 0, 0], [0, 0, 255], [0, 255, 0], [255, 255, 255]
  )
  static let delays = [100, 200, 300, 40]
  static let black: [UInt8] = [0, 0, 0]
  /// What the sample's background disposal leaves: its background colour (black), or transparency.
  static func isBackground(_ pixel: [UInt8]) -> Bool { pixel[3] < 30 || colour(pixel, isNear: black + [255]) }

  /// 60×40 on a black background, four frames: red; a blue 20×10 sub-frame at (10, 10), cleared to the background
  /// after it; a 20×10 sub-frame at (30, 20), transparent on its left half and green on its
  /// right, put back as before after it; a white 10×10 sub-frame at the top-left.
  static func sample(loop: Int = 3) -> TestGIF {
    var gif = TestGIF(width: 60, height: 40, palette: [red, blue, green, white, black], loop: loop, background: 4)
    gif.add(.init(width: 60, height: 40, indices: Array(repeating: 0, count: 2400), delay: delays[0]))
    gif.add(
      .init(
        x: 10, y: 10, width: 20, height: 10, indices: Array(repeating: 1, count: 200), delay: delays[1], disposal: .background))
    let half = (0..<10).flatMap { _ in Array(repeating: UInt8(9), count: 10) + Array(repeating: UInt8(2), count: 10) }
    gif.add(
      .init(x: 30, y: 20, width: 20, height: 10, indices: half, delay: delays[2], disposal: .previous, transparent: 9))
    gif.add(.init(width: 10, height: 10, indices: Array(repeating: 3, count: 100), delay: delays[3]))
    return gif
  }

  static func fetched(_ gif: TestGIF) -> FetchedData {
    FetchedData(source: ImageSource(path: "animated.gif"), bytes: ImageBytes(gif.bytes))
  }

  /// The RGBA pixel at (x, y) of frame `index`.
  func pixel(_ image: VipsImage, frame index: Int, x: Int, y: Int) throws -> [UInt8] {
    let pixel = try image.frame(index).materialized().pixel(x: x, y: y)
    return pixel.count == 3 ? pixel + [255] : pixel
  }

  @Test("a GIF decodes to its frames composed: sub-frames at their offsets, disposal to background or previous, transparency")
  func decodeComposes() throws {
    let decoded = try ImageDecoder().decode(Self.fetched(Self.sample()))
    #expect(decoded.frameCount == 4 && decoded.width == 60 && decoded.height == 40)
    #expect(decoded.image.frameDelays == Self.delays && decoded.image.loopCount == 4, "3 repeats: 4 plays")
    let image = decoded.image
    #expect(try pixel(image, frame: 0, x: 20, y: 15) == Self.red + [255])
    #expect(try pixel(image, frame: 1, x: 20, y: 15) == Self.blue + [255])
    #expect(try pixel(image, frame: 1, x: 5, y: 5) == Self.red + [255])
    // Frame 1 was cleared to the background after it was shown.
    #expect(Self.isBackground(try pixel(image, frame: 2, x: 20, y: 15)))
    #expect(try pixel(image, frame: 2, x: 45, y: 25) == Self.green + [255])
    #expect(try pixel(image, frame: 2, x: 35, y: 25) == Self.red + [255], "transparent pixels show what was there")
    // Frame 2 was put back as it was before it: no green, the hole of frame 1 still there.
    #expect(try pixel(image, frame: 3, x: 45, y: 25) == Self.red + [255])
    #expect(Self.isBackground(try pixel(image, frame: 3, x: 20, y: 15)))
    #expect(try pixel(image, frame: 3, x: 5, y: 5) == Self.white + [255])
  }

  @Test("decode → resize → encode keeps every frame, resized alike, with delays and loop count, as GIF and as WebP")
  func resizeKeepsTheAnimation() async throws {
    for format in [EncodeFormat.gif(), .webp(lossless: true)] {
      let decoded = try ImageDecoder().decode(Self.fetched(Self.sample()))
      let resized = try await harness.run(Resizer(width: 30, height: 30), on: decoded)
      #expect(resized.width == 30 && resized.height == 20 && resized.frameCount == 4)
      let encoded = try await harness.run(ImageEncoder(format), on: resized)
      #expect(encoded.width == 30 && encoded.height == 20)
      let back = try decodeBack(encoded).image
      #expect(back.frameCount == 4 && back.width == 30 && back.frameHeight == 20, "\(format)")
      #expect(back.frameDelays == Self.delays && back.loopCount == 4, "\(format)")
      #expect(colour(try pixel(back, frame: 1, x: 10, y: 7), isNear: Self.blue + [255]))
      #expect(colour(try pixel(back, frame: 2, x: 22, y: 12), isNear: Self.green + [255]))
      #expect(Self.isBackground(try pixel(back, frame: 3, x: 10, y: 7)))
      #expect(colour(try pixel(back, frame: 3, x: 2, y: 2), isNear: Self.white + [255]))
    }
  }

  @Test("the fused decoder (decode and resize as one stage) keeps the animation too")
  func fusedDecoder() async throws {
    let graph = try StageGraph(
      name: "fused", stages: [AnyStage(ImageDecoder()), AnyStage(Resizer(width: 30, height: 30)), AnyStage(ImageEncoder(.gif()))]
    )
    #expect(graph.runnableStages.first?.kind == "decode+resize")
    let encoded = try await PipelineExecutor().start(graph, input: Self.fetched(Self.sample()), as: EncodedImage.self).value
    let back = try decodeBack(encoded).image
    #expect(back.frameCount == 4 && back.width == 30 && back.frameHeight == 20 && back.frameDelays == Self.delays)
    // To a format of one image, the fused decoder decodes the first frame alone.
    let still = try StageGraph(
      name: "still", stages: [AnyStage(ImageDecoder()), AnyStage(Resizer(width: 30, height: 30)), AnyStage(ImageEncoder(.png()))])
    #expect(still.runnableStages.first?.identifier.hasSuffix("first-frame") == true)
    let png = try await PipelineExecutor().start(still, input: Self.fetched(Self.sample()), as: EncodedImage.self).value
    let first = try decodeBack(png).image
    #expect(!first.isAnimated && first.width == 30 && first.height == 20)
    #expect(graph.runnableStages.first?.identifier.hasSuffix("first-frame") == false)
  }

  @Test("crops and operations apply to every frame; trim decides by the first frame")
  func framewiseOperations() async throws {
    let decoded = try ImageDecoder().decode(Self.fetched(Self.sample()))
    let cropped = try await harness.run(Cropper(.pixels(x: 10, y: 10, width: 20, height: 10)), on: decoded)
    #expect(cropped.width == 20 && cropped.height == 10 && cropped.frameCount == 4)
    #expect(try pixel(cropped.image, frame: 1, x: 5, y: 5) == Self.blue + [255])
    let turned = try await harness.run(Rotator(.quarter), on: decoded)
    #expect(turned.width == 40 && turned.height == 60 && turned.frameCount == 4)
    // A quarter turn clockwise puts the top-left white square at the top-right.
    #expect(try pixel(turned.image, frame: 3, x: 35, y: 5) == Self.white + [255])
    let padded = try await harness.run(Extender(top: 5, left: 5, background: [0, 0, 0, 255]), on: decoded)
    #expect(padded.width == 65 && padded.height == 45 && padded.frameCount == 4)
    // A frame bordered in white: every frame loses the first frame's border.
    var gif = TestGIF(width: 30, height: 30, palette: [Self.white, Self.blue, Self.red], loop: 0)
    let framed = (0..<30).flatMap { y in (0..<30).map { x in (5..<25).contains(x) && (5..<25).contains(y) ? UInt8(1) : 0 } }
    gif.add(.init(width: 30, height: 30, indices: framed, delay: 50))
    gif.add(.init(x: 0, y: 0, width: 30, height: 30, indices: Array(repeating: 2, count: 900), delay: 50))
    let trimmed = try await harness.run(Trimmer(), on: try ImageDecoder().decode(Self.fetched(gif)))
    #expect(trimmed.width == 20 && trimmed.height == 20 && trimmed.frameCount == 2)
    #expect(try pixel(trimmed.image, frame: 1, x: 0, y: 0) == Self.red + [255])
  }

  @Test("more frames than one group (split and joined in groups of 32) stay in order, through two stages")
  func manyFramesInOrder() async throws {
    let count = 70
    let palette: [[UInt8]] = (0..<count).map { (index: Int) -> [UInt8] in
      [UInt8(index * 3), UInt8(255 - index * 3), UInt8((index * 37) % 256)]
    }
    var gif = TestGIF(width: 16, height: 8, palette: palette, loop: 0)
    for index in 0..<count {
      let delay = 20 + 10 * (index % 4)
      gif.add(TestGIF.Frame(width: 16, height: 8, indices: [UInt8](repeating: UInt8(index), count: 128), delay: delay))
    }
    let decoded = try ImageDecoder().decode(Self.fetched(gif))
    let flipped = try await harness.run(Flipper(.horizontal), on: decoded)
    let resized = try await harness.run(Resizer(width: 8, height: 8), on: flipped)
    let back = try decodeBack(try await harness.run(ImageEncoder(.gif()), on: resized)).image
    #expect(back.frameCount == count && back.width == 8 && back.frameHeight == 4)
    #expect(back.frameDelays == (0..<count).map { 20 + 10 * ($0 % 4) })
    for index in [0, 31, 32, 33, 63, 64, 69] {
      #expect(colour(try pixel(back, frame: index, x: 4, y: 2), isNear: palette[index] + [255], tolerance: 12), "frame \(index)")
    }
  }

  @Test("a still format takes the first frame; animated false decodes only the first frame and notes it")
  func stillOutputs() async throws {
    let decoded = try ImageDecoder().decode(Self.fetched(Self.sample()))
    let jpeg = try await harness.run(ImageEncoder(.png()), on: decoded)
    let back = try decodeBack(jpeg).image
    #expect(!back.isAnimated && back.width == 60 && back.height == 40)
    let still = try await harness.run(ImageDecoder(animated: false), on: Self.fetched(Self.sample()))
    #expect(still.frameCount == 1 && still.height == 40 && still.sourceFrames == 4)
    #expect(harness.notes.contains { $0.contains("4 frames") && $0.contains("only the first") }, "\(harness.notes)")
  }

  @Test("maxFrames and maxPixels (canvas × frames) bound an animation before it is decoded")
  func limits() throws {
    let frames = #expect(throws: PipelineError.self) { try ImageDecoder(maxFrames: 3).decode(Self.fetched(Self.sample())) }
    #expect(frames?.code == .imageTooLarge && frames?.message.contains("maxFrames") == true, "\(String(describing: frames))")
    // 60 × 40 × 4 = 9600 pixels: one frame fits in 5000, four do not.
    let pixels = #expect(throws: PipelineError.self) { try ImageDecoder(maxPixels: 5000).decode(Self.fetched(Self.sample())) }
    #expect(pixels?.code == .imageTooLarge && pixels?.message.contains("9600") == true, "\(String(describing: pixels))")
    #expect(try ImageDecoder(maxPixels: 5000, animated: false).decode(Self.fetched(Self.sample())).frameCount == 1)
  }
}
