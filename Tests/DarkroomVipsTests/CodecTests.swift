import Darkroom
import DarkroomTesting
import DarkroomVipsTesting
import Testing

@Suite("Decode and encode")
struct CodecTests {
  static let formats: [EncodeFormat] = [
    .jpeg(quality: 85), .jpeg(progressive: true), .png(), .png(palette: true), .webp(), .webp(lossless: true), .avif(effort: 0),
    .gif(),
  ]

  @Test("every encoder round-trips through the decoder", arguments: formats)
  func roundTrip(_ format: EncodeFormat) throws {
    let source = try TestImages.fetched(.png(), width: 97, height: 61)
    let decoded = try ImageDecoder().decode(source).materializedForTest()
    let encoded = try ImageEncoder(format).encode(decoded)
    #expect(encoded.format == format.imageFormat)
    #expect(ImageFormat.sniff(encoded.bytes.prefix(64)) == (format.imageFormat == .avif ? .avif : format.imageFormat))
    let back = try decodeBack(encoded)
    #expect(back.width == 97)
    #expect(back.height == 61)
    // Lossy codecs change pixels a little; a wrong colour space or channel order changes them a lot.
    let tolerance: Double = format == .gif() || format == .png(palette: true) ? 12 : 8
    #expect(try meanDifference(back.image, decoded.image) < tolerance)
  }

  @Test("auto keeps the source format where it can")
  func autoFormat() throws {
    for (source, expected) in [(EncodeFormat.jpeg(), ImageFormat.jpeg), (.webp(), .webp), (.png(), .png), (.gif(), .gif)] {
      let decoded = try ImageDecoder().decode(try TestImages.fetched(source, width: 40, height: 30))
      #expect(try ImageEncoder(.auto).encode(decoded).format == expected)
    }
  }

  @Test("alpha is flattened onto the background for JPEG and kept for PNG")
  func alpha() throws {
    var pixels = [UInt8](repeating: 0, count: 8 * 8 * 4)  // fully transparent black
    for index in stride(from: 3, to: pixels.count, by: 4) { pixels[index] = 0 }
    let image = try VipsImage.fromPixels(pixels, width: 8, height: 8, bands: 4)
    let decoded = DecodedImage(source: ImageSource("mem"), image: image, sourceFormat: .png, sourceWidth: 8, sourceHeight: 8)
    let jpeg = try decodeBack(try ImageEncoder(.jpeg(), background: [255, 0, 0]).encode(decoded))
    #expect(jpeg.image.bands == 3)
    #expect(colour(try jpeg.materializedForTest().image.pixel(x: 4, y: 4), isNear: [255, 0, 0], tolerance: 10))
    let png = try decodeBack(try ImageEncoder(.png()).encode(decoded))
    #expect(png.image.hasAlpha)
  }

  @Test("metadata is stripped unless kept")
  func metadata() throws {
    let tagged = try TestImages.fetched(.jpeg(), width: 40, height: 20, orientation: 6)
    let decoded = try ImageDecoder(autoRotate: false).decode(tagged).materializedForTest()
    #expect(decoded.image.orientation == 6)
    #expect(try decodeBack(try ImageEncoder(.jpeg()).encode(decoded)).image.orientation == 1)
    #expect(try decodeBack(try ImageEncoder(.jpeg(), keepMetadata: true).encode(decoded)).image.orientation == 6)
  }

  @Test("the decoder refuses untrusted and unknown formats by their bytes")
  func refusesUntrusted() throws {
    let cases: [([UInt8], String)] = [
      (Array("BM".utf8) + [UInt8](repeating: 0, count: 60), "BMP images are not accepted"),
      (Array("%PDF-1.4\n".utf8), "PDF images are not accepted"),
      (Array("<svg xmlns='http://www.w3.org/2000/svg'/>".utf8), "SVG images are not accepted"),
      (Array("hello, world".utf8), "the bytes are not an image of a supported format"),
    ]
    for (bytes, message) in cases {
      let input = FetchedData(source: ImageSource("x"), bytes: ImageBytes(bytes))
      #expect(throws: PipelineError.self) { try ImageDecoder().decode(input) }
      do {
        _ = try ImageDecoder().decode(input)
      } catch {
        #expect(error.code == .unsupportedFormat)
        #expect(error.message.hasPrefix(message), "\(error.message)")
      }
    }
    do {
      _ = try ImageDecoder().decode(FetchedData(source: ImageSource("x"), bytes: ImageBytes([UInt8]())))
      Issue.record("decoded nothing")
    } catch {
      #expect(error.code == .corruptImage)
    }
  }

  @Test("maxPixels is checked from the header")
  func pixelLimit() throws {
    let input = try TestImages.fetched(.png(), width: 300, height: 200)
    do {
      _ = try ImageDecoder(maxPixels: 59_999).decode(input)
      Issue.record("accepted an image over the limit")
    } catch {
      #expect(error.code == .imageTooLarge)
      #expect(error.message.contains("300×200"))
    }
    #expect(try ImageDecoder(maxPixels: 60_000).decode(input).width == 300)
  }

  @Test("a truncated JPEG fails strictly and decodes partially when lenient")
  func strictAndLenient() async throws {
    let whole = try TestImages.encoded(.jpeg(), width: 640, height: 480)
    let truncated = FetchedData(source: ImageSource("cut.jpg"), bytes: ImageBytes(whole.prefix(whole.count / 2)))
    let strict = Pipeline(name: "strict") {
      ImageDecoder()
      ImageEncoder(.png())
    }
    let failure = await strict.run(truncated).result
    guard case .failure(let error) = failure else {
      Issue.record("a truncated JPEG decoded strictly")
      return
    }
    #expect(error.code == .corruptImage)
    let lenient = Pipeline(name: "lenient") {
      ImageDecoder(lenient: true)
      ImageEncoder(.png())
    }
    let partial = try await lenient.process(truncated)
    #expect(partial.partial)
    #expect(partial.width == 640)
    let complete = try await lenient.process(FetchedData(source: ImageSource("whole.jpg"), bytes: whole))
    #expect(!complete.partial)
  }
}

extension EncodeFormat: CustomTestStringConvertible {
  public var testDescription: String { identifier }
}

@Suite("Live decoded images")
struct LiveImageTests {
  @Test("concurrent shared decodes of identical bytes (any source) share one in-memory image")
  func sharedDecode() async throws {
    let bytes = try TestImages.encoded(.png(), width: 300, height: 200)
    let copy = ImageBytes(Array(bytes.data))  // same content, another buffer
    let other = try TestImages.encoded(.png(), width: 300, height: 200, quadrants: true)
    let decoder = ImageDecoder(share: true)
    let images = try await withThrowingTaskGroup(of: DecodedImage.self) { group in
      for index in 0..<24 {
        let input = FetchedData(source: ImageSource(path: "/photos/\(index).png"), bytes: index % 2 == 0 ? bytes : copy)
        group.addTask { try await decoder.process(input, context: StageContext()) }
      }
      return try await group.reduce(into: [DecodedImage]()) { $0.append($1) }
    }
    #expect(images.allSatisfy { $0.image === images[0].image })
    #expect(Set(images.map(\.source)).count == 24)
    let different = try await decoder.process(FetchedData(source: ImageSource("x.png"), bytes: other), context: StageContext())
    #expect(different.image !== images[0].image)
    #expect(images[0].image.width == 300 && images[0].image.height == 200)
    let plain = try await ImageDecoder().process(FetchedData(source: ImageSource("y.png"), bytes: bytes), context: StageContext())
    #expect(plain.image !== images[0].image)
  }
}
