import Darkroom
import DarkroomTesting
import DarkroomVipsTesting
import Foundation
import Testing

@Suite("JPEG straight through libjpeg-turbo")
struct DirectJPEGTests {
  /// A photo-like JPEG: a gradient with detail, so that every DCT coefficient matters.
  static func photo(width: Int, height: Int, quality: Int = 90, grey: Bool = false) throws -> FetchedData {
    let bands = grey ? 1 : 3
    var pixels = TestImages.gradientPixels(width: width, height: height, bands: bands)
    pixels.withUnsafeMutableBufferPointer { pixels in  // not the array itself: seconds in a debug build
      for index in stride(from: 0, to: pixels.count, by: 7) {
        pixels[index] = UInt8(truncatingIfNeeded: index &* 2_654_435_761 >> 13)
      }
    }
    let image = try VipsImage.fromPixels(pixels, width: width, height: height, bands: bands)
    let decoded = DecodedImage(
      source: ImageSource("memory"), image: image, sourceFormat: .png, sourceWidth: width, sourceHeight: height)
    let bytes = try ImageEncoder(.jpeg(quality: quality)).encode(decoded).bytes
    return FetchedData(source: ImageSource(path: "photo.jpg"), bytes: bytes)
  }

  static func header(_ input: FetchedData) throws -> VipsImage {
    try ImageDecoder.load(.jpeg, from: input.bytes, source: input.source)
  }

  @Test("the decode stops at the smallest eighth that still covers the output")
  func smallestEighth() {
    // Case A's photos: 2725×2225 to 300×245 decodes at 1/8 (341×279), 2048² to 300² at 2/8
    // (1/8 would be 256 pixels, short of 300); case B: 2725×2225 to 720×588 at 3/8.
    #expect(DirectJPEG.eighths(width: 2725, height: 2225, covering: (300, 245)) == 1)
    #expect(DirectJPEG.eighths(width: 2048, height: 2048, covering: (300, 300)) == 2)
    #expect(DirectJPEG.eighths(width: 2725, height: 2225, covering: (720, 588)) == 3)
    #expect(DirectJPEG.eighths(width: 2400, height: 1800, covering: (300, 225)) == 1)
    #expect(DirectJPEG.eighths(width: 2399, height: 1800, covering: (300, 225)) == 2)
    #expect(DirectJPEG.eighths(width: 100, height: 100, covering: (100, 100)) == 8)
    #expect(DirectJPEG.eighths(width: 100, height: 100, covering: (150, 150)) == 8)
  }

  @Test("at 4/8 it decodes the pixels libvips' loader decodes at shrink 2, and the partial edge besides")
  func sameAsLibvipsHalf() throws {
    let input = try Self.photo(width: 1001, height: 667)
    let direct = try #require(DirectJPEG.load(input, header: try Self.header(input), eighths: 4))
    // libjpeg rounds up (501×334); libvips' loader drops the partial last column and row.
    #expect(direct.width == 501 && direct.height == 334 && direct.bands == 3)
    let libvips = try ImageDecoder.load(.jpeg, from: input.bytes, source: input.source, shrink: 2).materialized()
    #expect(libvips.width == 500 && libvips.height == 333)
    let whole = try DirectJPEG.prepared(direct, width: 1001, height: 667, eighths: 4, cropping: true)
    #expect(whole.image.width == 500 && whole.image.height == 333 && whole.extent == (500, 333))
    #expect(try whole.image.pixelBytes() == libvips.pixelBytes())
    // Without a crop, a large image keeps its partial edge and is scaled from its true extent.
    let kept = try DirectJPEG.prepared(direct, width: 1001, height: 667, eighths: 4, cropping: false)
    #expect(kept.image.width == 501 && kept.extent == (500.5, 333.5))
    // At 3/8, which libvips' loader cannot do: 1001 × 3/8 = 375.4, 667 × 3/8 = 250.1.
    let threeEighths = try #require(DirectJPEG.load(input, header: try Self.header(input), eighths: 3))
    #expect(threeEighths.width == 376 && threeEighths.height == 251)
  }

  @Test("a relative crop of a thin JPEG takes whole pixels, not the partial edge alone")
  func thinCrop() async throws {
    // 17×800, white but for a black last column: at 1/8 the third column would be that edge alone.
    var pixels = [UInt8](repeating: 255, count: 17 * 800 * 3)
    for row in 0..<800 { for band in 0..<3 { pixels[(row * 17 + 16) * 3 + band] = 0 } }
    let image = try VipsImage.fromPixels(pixels, width: 17, height: 800, bands: 3)
    let decoded = DecodedImage(
      source: ImageSource("memory"), image: image, sourceFormat: .png, sourceWidth: 17, sourceHeight: 800)
    let input = FetchedData(
      source: ImageSource(path: "stripe.jpg"), bytes: try ImageEncoder(.jpeg(quality: 95)).encode(decoded).bytes)
    let stages = [
      AnyStage(ImageDecoder()), AnyStage(Cropper(.relative(x: 0.5, y: 0, width: 0.5, height: 1))),
      AnyStage(Resizer(height: 100)), AnyStage(ImageEncoder(.png())),
    ]
    let fused = try decodeBack(
      try await Pipeline<FetchedData, EncodedImage>(StageGraph(name: "fused", stages: stages, fusion: true)).process(input))
    let plain = try decodeBack(
      try await Pipeline<FetchedData, EncodedImage>(StageGraph(name: "plain", stages: stages, fusion: false)).process(input))
    #expect(fused.image.width == plain.image.width && fused.image.height == plain.image.height)
    #expect(try meanDifference(fused.image, plain.image) < 40)  // the edge alone would be 223 off
  }

  @Test("a grey JPEG decodes to one band")
  func grey() throws {
    let input = try Self.photo(width: 640, height: 480, grey: true)
    let direct = try #require(DirectJPEG.load(input, header: try Self.header(input), eighths: 2))
    #expect(direct.width == 160 && direct.height == 120 && direct.bands == 1)
    let libvips = try ImageDecoder.load(.jpeg, from: input.bytes, source: input.source, shrink: 4).materialized()
    #expect(try direct.pixelBytes() == libvips.pixelBytes())
  }

  @Test("read from the open file with pread, the decode is the same as from memory")
  func fromDescriptor() throws {
    let input = try Self.photo(width: 1200, height: 900)
    let directory = NSTemporaryDirectory() + "darkroom-direct-\(getpid())"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let path = try TestImages.write(input.bytes, named: "photo.jpg", in: directory)
    let descriptor = open(path, O_RDONLY | O_CLOEXEC)
    try #require(descriptor >= 0)
    let file = FetchedData(source: ImageSource(path: path), bytes: ImageBytes(openFile: descriptor, count: input.bytes.count))
    #expect(file.bytes.streamingDescriptor != nil)
    let header = try Self.header(input)
    let fromFile = try #require(DirectJPEG.load(file, header: header, eighths: 3))
    let fromMemory = try #require(DirectJPEG.load(input, header: header, eighths: 3))
    #expect(try fromFile.pixelBytes() == fromMemory.pixelBytes())
    #expect(file.bytes.streamingDescriptor != nil)  // never read into memory

    // A file cut short (the reader stops at the count it was given) is declined.
    let cut = FetchedData(source: file.source, bytes: ImageBytes(openFile: dup(descriptor), count: input.bytes.count / 2))
    #expect(DirectJPEG.load(cut, header: header, eighths: 3) == nil)
  }

  @Test("anything but a clean grey or RGB JPEG is declined: CMYK, a cut file, a warning, a kill, another header")
  func declines() throws {
    let cmyk = try corpusFile("pillow/pil_sample_cmyk.jpg")
    #expect(DirectJPEG.load(cmyk, header: try Self.header(cmyk), eighths: 4) == nil)

    let input = try Self.photo(width: 800, height: 600)
    let header = try Self.header(input)
    let cut = FetchedData(source: input.source, bytes: ImageBytes(Array(input.bytes.data.prefix(input.bytes.count * 2 / 3))))
    #expect(DirectJPEG.load(cut, header: header, eighths: 2) == nil)

    // Garbage inside the entropy-coded data: libjpeg warns ("Corrupt JPEG data").
    var damaged = Array(input.bytes.data)
    for index in stride(from: damaged.count / 2, to: damaged.count / 2 + 64, by: 1) { damaged[index] = 0xFF }
    let warned = FetchedData(source: input.source, bytes: ImageBytes(damaged))
    #expect(DirectJPEG.load(warned, header: header, eighths: 2) == nil)

    let other = try Self.photo(width: 640, height: 480)
    #expect(DirectJPEG.load(other, header: header, eighths: 2) == nil)  // the header is not this file's

    let killed = try Self.header(input)
    killed.kill()
    #expect(DirectJPEG.load(input, header: killed, eighths: 2) == nil)
  }

  @Test("a cut JPEG still fails strict decoding with corruptImage, and decodes partially when lenient")
  func cutFileThroughThePipeline() async throws {
    let input = try Self.photo(width: 1600, height: 1200)
    let cut = FetchedData(source: input.source, bytes: ImageBytes(Array(input.bytes.data.prefix(input.bytes.count / 2))))
    let strict = try Pipeline<FetchedData, EncodedImage>(
      StageGraph(
        name: "strict",
        stages: [AnyStage(ImageDecoder()), AnyStage(Resizer(width: 300, height: 300)), AnyStage(ImageEncoder(.jpeg()))]))
    let error = await #expect(throws: PipelineError.self) { try await strict.process(cut) }
    #expect(error?.code == .corruptImage)
    let lenient = try Pipeline<FetchedData, EncodedImage>(
      StageGraph(
        name: "lenient",
        stages: [
          AnyStage(ImageDecoder(lenient: true)), AnyStage(Resizer(width: 300, height: 300)), AnyStage(ImageEncoder(.jpeg())),
        ]))
    let partial = try await lenient.process(cut)
    #expect(partial.width == 300 && partial.height == 225 && partial.partial)
  }

  @Test("the fused thumbnail matches the full-size resample closely, exactly sized, for every orientation")
  func fusedCloseToFullSize() async throws {
    for orientation in [1, 3, 6, 8] {
      let input = try TestImages.fetched(.jpeg(quality: 95), width: 2725, height: 2225, orientation: orientation)
      for resizer in [Resizer(width: 300, height: 300), Resizer(width: 720, height: 588, mode: .fill)] {
        let stages = [AnyStage(ImageDecoder()), AnyStage(resizer), AnyStage(ImageEncoder(.png()))]
        let fused = try Pipeline<FetchedData, EncodedImage>(StageGraph(name: "fused", stages: stages, fusion: true))
        let plain = try Pipeline<FetchedData, EncodedImage>(StageGraph(name: "plain", stages: stages, fusion: false))
        let a = try decodeBack(try await fused.process(input))
        let b = try decodeBack(try await plain.process(input))
        #expect(a.width == b.width && a.height == b.height)
        #expect(try meanDifference(a.image, b.image) < 1.5, "orientation \(orientation), \(resizer.identifier)")
      }
    }
  }

  @Test("straight through libjpeg, the encoder writes libvips' bytes: RGB, grey, progressive, q90 and up unsubsampled")
  func sameBytesAsLibvips() throws {
    let photo = try ImageDecoder().decode(try Self.photo(width: 333, height: 251)).image.materialized()
    let grey = try ImageDecoder().decode(try Self.photo(width: 251, height: 333, grey: true)).image.materialized()
    for (image, quality, progressive) in [
      (photo, 80, false), (photo, 89, false), (photo, 90, false), (photo, 100, false), (photo, 1, false), (photo, 75, true),
      (grey, 80, false), (grey, 95, true),
    ] {
      let direct = try #require(try image.jpegBytes(quality: quality, progressive: progressive, direct: true))
      let libvips = try #require(try image.jpegBytes(quality: quality, progressive: progressive, direct: false))
      #expect(direct == libvips, "q\(quality) progressive \(progressive) bands \(image.bands)")
    }
    // A resize pulled through on this thread: the same bytes as libvips' thread pool makes.
    let resized = try photo.resized(horizontal: 0.37, vertical: 0.41, kernel: .lanczos3)
    #expect(try resized.jpegBytes(quality: 80, direct: true) == resized.jpegBytes(quality: 80, direct: false))
  }

  @Test("the direct encoder declines what libvips' saver must convert, and fails a killed image")
  func encoderDeclines() throws {
    let rgba = try VipsImage.fromPixels(
      TestImages.gradientPixels(width: 64, height: 64, bands: 4), width: 64, height: 64, bands: 4)
    #expect(try rgba.jpegBytes(quality: 80, direct: true) == nil)
    let photo = try ImageDecoder().decode(try Self.photo(width: 320, height: 240)).image
    let resized = try photo.resized(horizontal: 0.5, vertical: 0.5, kernel: .lanczos3)
    resized.kill()
    #expect(throws: PipelineError.self) { try resized.jpegBytes(quality: 80, direct: true) }
  }

  @Test("a cut JPEG pulled through on the encoder's thread fails with libvips' error alone, no tile warnings")
  func failureMessage() async throws {
    let input = try Self.photo(width: 1200, height: 900)
    let cut = FetchedData(source: input.source, bytes: ImageBytes(Array(input.bytes.data.prefix(input.bytes.count / 2))))
    let pipeline = try Pipeline<FetchedData, EncodedImage>(
      StageGraph(name: "plain", stages: [AnyStage(ImageDecoder()), AnyStage(ImageEncoder(.jpeg()))]))
    let error = await #expect(throws: PipelineError.self) { try await pipeline.process(cut) }
    #expect(error?.code == .corruptImage)
    #expect(error?.message.contains("error in tile") == false)
  }

  @Test("libvips loads no module but HEIF: never ImageMagick, PDF, OpenSlide or JPEG XL")
  func modules() throws {
    try Vips.initialize()
    // /proc files report no size: read to the end rather than by the size.
    let maps = {
      let handle = FileHandle(forReadingAtPath: "/proc/self/maps")
      defer { try? handle?.close() }
      return String(decoding: (try? handle?.readToEnd()) ?? Data(), as: UTF8.self)
    }
    for untrusted in ["vips-magick", "vips-poppler", "vips-openslide", "vips-jxl"] { #expect(!maps().contains(untrusted)) }
    let avif = try TestImages.fetched(.avif(quality: 50), width: 64, height: 48)
    let back = try ImageDecoder().decode(avif)
    #expect(back.image.width == 64 && back.image.height == 48)
    #expect(maps().contains("vips-heif"))
    #expect(getenv("VIPSHOME").map { String(cString: $0).hasPrefix("/proc/") } == true)
  }
}
