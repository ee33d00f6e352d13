import Darkroom
import DarkroomTesting
import DarkroomVipsTesting
import Testing

@Suite("Regressions")
struct RegressionTests {
  @Test("a JPEG turned by its EXIF orientation decodes and encodes without a resize", arguments: 2...8)
  func orientationWithoutResize(_ orientation: Int) async throws {
    let input = try TestImages.fetched(.jpeg(), width: 640, height: 400, quadrants: true, orientation: orientation)
    let pipeline = Pipeline(name: "rotate") {
      ImageDecoder()
      ImageEncoder(.png())
    }
    let output = try await pipeline.process(input)
    #expect([output.width, output.height] == (orientation >= 5 ? [400, 640] : [640, 400]))
  }

  @Test("fill and center crops of an EXIF-turned JPEG through the fused path", arguments: 2...8)
  func fillWithOrientation(_ orientation: Int) async throws {
    // Found by the disk-fault tests: fill 720×588 of Examples/images/portrait-rotated.jpg
    // (orientation 6) failed with "out of order read", because the shrunk image was turned while
    // still being read sequentially.
    let input = try TestImages.fetched(.jpeg(), width: 1800, height: 1200, quadrants: true, orientation: orientation)
    for mode in [ResizeMode.fill, .center] {
      let pipeline = Pipeline(name: "fill") {
        ImageDecoder()
        Resizer(width: 720, height: 588, mode: mode)
        ImageEncoder(.jpeg())
      }
      let output = try await pipeline.process(input)
      #expect([output.width, output.height] == [720, 588])
    }
  }

  @Test("HEIF/AVIF and WebP sources go through the fused path with the right size")
  func fusedOtherFormats() async throws {
    for format in [EncodeFormat.avif(effort: 0), .webp()] {
      let input = try TestImages.fetched(format, width: 1200, height: 800)
      let pipeline = Pipeline(name: "thumb") {
        ImageDecoder()
        Resizer(width: 150, height: 150, mode: .fit)
        ImageEncoder(.jpeg())
      }
      let output = try await pipeline.process(input)
      #expect([output.width, output.height] == [150, 100])
    }
  }

  @Test("auto encoding keeps the given quality")
  func autoQuality() throws {
    let decoded = try ImageDecoder().decode(try TestImages.fetched(.jpeg(), width: 320, height: 200)).materializedForTest()
    let low = try ImageEncoder(.auto(quality: 10)).encode(decoded)
    let high = try ImageEncoder(.auto(quality: 95)).encode(decoded)
    #expect(low.format == .jpeg)
    #expect(low.bytes.count < high.bytes.count)
  }
}

@Suite("Header checks before libvips")
struct HeaderCheckTests {
  @Test("JPEG frame markers are found: baseline, progressive; lossless would be refused")
  func jpegMarkers() throws {
    let baseline = try TestImages.encoded(.jpeg(), width: 40, height: 30)
    let progressive = try TestImages.encoded(.jpeg(progressive: true), width: 40, height: 30)
    #expect(ImageFormat.jpegFrameMarker(baseline) == 0xC0)
    #expect(ImageFormat.jpegFrameMarker(progressive) == 0xC2)
    #expect(!ImageFormat.isUnsupportedJPEGProcess(0xC0) && !ImageFormat.isUnsupportedJPEGProcess(0xC2))
    #expect(ImageFormat.isUnsupportedJPEGProcess(0xC3))
    #expect(ImageFormat.jpegFrameMarker(ImageBytes([0xFF, 0xD8, 0xFF])) == nil)
  }

  @Test("the declared size of an AVIF is read from its ispe box")
  func heifSize() throws {
    let avif = try TestImages.encoded(.avif(effort: 0), width: 123, height: 45)
    let declared = try #require(ImageFormat.declaredHEIFSize(avif))
    #expect(declared.width == 123 && declared.height == 45)
    do {
      _ = try ImageDecoder(maxPixels: 1000).decode(FetchedData(source: ImageSource("a.avif"), bytes: avif))
      Issue.record("accepted an AVIF over the limit")
    } catch {
      #expect(error.code == .imageTooLarge)
    }
  }

  @Test("an ispe box declaring two 32-bit sides is refused as too large, not an overflow")
  func heifSizeOverflow() throws {
    // Found by fuzzing: comparing 4294967295 × 4294967295 with the largest size so far trapped.
    var bytes = [UInt8](try TestImages.encoded(.avif(effort: 0), width: 123, height: 45).data)
    let ispe = try #require((4..<bytes.count - 16).first { Array(bytes[$0..<$0 + 4]) == Array("ispe".utf8) })
    for offset in ispe + 8..<ispe + 16 { bytes[offset] = 0xFF }
    let declared = try #require(ImageFormat.declaredHEIFSize(ImageBytes(bytes)))
    #expect(declared.width == 4_294_967_295 && declared.height == 4_294_967_295)
    do {
      _ = try ImageDecoder().decode(FetchedData(source: ImageSource("huge.avif"), bytes: ImageBytes(bytes)))
      Issue.record("accepted an AVIF declaring 4294967295×4294967295 pixels")
    } catch {
      #expect(error.code == .imageTooLarge)
    }
  }
}
