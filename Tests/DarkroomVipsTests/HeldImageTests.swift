import Darkroom
import DarkroomTesting
import DarkroomVipsTesting
import Foundation
import Testing

/// Decodes `data` with the real decoder, all the way to pixels; the error it throws, or nil.
private func decodeError(_ data: Data, _ name: String, maxPixels: Int = ImageDecoder.defaultMaxPixels) -> PipelineError? {
  do {
    _ = try ImageDecoder(maxPixels: maxPixels).decode(HostileFiles.fetched(data, name)).image.materialized()
    return nil
  } catch {
    return error
  }
}

@Suite("Memory held by decoders that cannot stream is bounded by maxPixels")
struct HeldImageTests {
  @Test(
    "an AVIF whose AV1 sequence header declares more than its ispe is judged by the sequence header",
    arguments: [false, true])
  func avifSequenceHeader(inConfiguration: Bool) throws {
    let lying = HostileFiles.avif(ispe: (64, 48), sequence: (65272, 8707), inConfiguration: inConfiguration)
    let declared = try #require(HEIFDeclaration(ImageBytes(lying)))
    #expect(declared.width == 65272 && declared.height == 8707 && declared.fromSequenceHeader)
    let error = decodeError(lying, "lying.avif")
    #expect(error?.code == .imageTooLarge, "\(String(describing: error))")
    #expect(error?.message.contains("65272×8707") == true, "\(String(describing: error))")
    // A header that agrees with ispe passes the size check (the missing frame is then damage).
    let honest = HostileFiles.avif(ispe: (64, 48), sequence: (64, 48), inConfiguration: inConfiguration)
    #expect(decodeError(honest, "honest.avif")?.code != .imageTooLarge)
  }

  @Test("a HEIC whose HEVC sequence parameter set declares more than its ispe is judged by the SPS", arguments: [false, true])
  func heicSequenceParameterSet(inData: Bool) throws {
    let lying = HostileFiles.heic(ispe: (64, 48), sps: (65272, 8707), inData: inData)
    let declared = try #require(HEIFDeclaration(ImageBytes(lying)))
    #expect(declared.width == 65272 && declared.height == 8707 && declared.fromSequenceHeader)
    #expect(declared.planeSamplesPerPixel == 1.5 && declared.bitDepth == 8)
    let error = decodeError(lying, "lying.heic")
    #expect(error?.code == .imageTooLarge, "\(String(describing: error))")
    #expect(error?.message.contains("65272×8707") == true, "\(String(describing: error))")
    let honest = HostileFiles.heic(ispe: (64, 48), sps: (64, 48), inData: inData)
    #expect(HEIFDeclaration(ImageBytes(honest)).map { $0.width == 64 && $0.height == 48 } == true)
    #expect(decodeError(honest, "honest.heic")?.code != .imageTooLarge)
  }

  @Test("a HEIC's NAL units are also walked with 4-byte lengths, what libheif reads whatever hvcC declares")
  func heicLengthSize() throws {
    let lying = HostileFiles.heic(ispe: (64, 48), sps: (8192, 8192), inData: true, declaredLengthSize: 2)
    let declared = try #require(HEIFDeclaration(ImageBytes(lying)))
    #expect(declared.width == 8192 && declared.height == 8192)
    #expect(decodeError(lying, "short-lengths.heic", maxPixels: 1_000_000)?.code == .imageTooLarge)
  }

  @Test("a decoy idat box cannot hide the sequence header of an item stored in meta's idat")
  func avifDecoyIDAT() throws {
    let lying = HostileFiles.avif(ispe: (64, 48), sequence: (65272, 8707), inIDAT: true)
    let declared = try #require(HEIFDeclaration(ImageBytes(lying)))
    #expect(declared.width == 65272 && declared.height == 8707)
    #expect(decodeError(lying, "idat.avif")?.code == .imageTooLarge)
    // A lying header in the second idat is found too.
    let second = HostileFiles.avif(
      ispe: (64, 48), sequence: (64, 48), inIDAT: true, decoy: HostileFiles.sequenceHeaderOBU(width: 30000, height: 30000))
    #expect(decodeError(second, "second.avif")?.code == .imageTooLarge)
  }

  @Test("the AVIF walk has fixed budgets: thousands of whole-file extents are refused at once, not walked")
  func avifWalkBudget() throws {
    let many = HostileFiles.avif(ispe: (64, 48), sequence: (64, 48), extraExtents: 5_000)
    let declared = try #require(HEIFDeclaration(ImageBytes(many)))
    #expect(declared.exceededBudget)
    let error = decodeError(many, "extents.avif")
    #expect(error?.code == .unsupportedFormat, "\(String(describing: error))")
    #expect(error?.message.contains("more structure than any real image") == true, "\(String(describing: error))")
    let some = HostileFiles.avif(ispe: (64, 48), sequence: (64, 48), extraExtents: 100)
    #expect(HEIFDeclaration(ImageBytes(some))?.exceededBudget == false)
  }

  @Test("a real AVIF's declaration matches its size, read from its sequence header and av1C")
  func realAVIF() throws {
    let avif = try TestImages.encoded(.avif(effort: 0), width: 123, height: 45)
    let declared = try #require(HEIFDeclaration(avif))
    #expect(declared.width == 123 && declared.height == 45)
    #expect(declared.fromSequenceHeader)
    #expect(declared.bitDepth == 8)
    #expect([1.5, 2, 3].contains(declared.planeSamplesPerPixel))
  }

  @Test("an AVIF counts its decoder's planes and RGB copy against maxPixels: refused near the limit, decoded below")
  func avifHeldBytes() throws {
    let avif = Data(try TestImages.encoded(.avif(effort: 0), width: 123, height: 45).data)
    let pixels = 123 * 45
    let error = decodeError(avif, "a.avif", maxPixels: pixels)
    #expect(error?.code == .imageTooLarge, "\(String(describing: error))")
    #expect(error?.message.contains("decoder holds the whole image") == true, "\(String(describing: error))")
    #expect(decodeError(avif, "a.avif", maxPixels: pixels * 3) == nil)
  }

  @Test("an interlaced 16-bit RGBA PNG is refused where the same image streamed is decoded")
  func interlacedPNG() {
    let side = 200
    let maxPixels = 2 * side * side  // 8 bytes a pixel of this image
    let interlaced = HostileFiles.zeroPNG(width: side, height: side, colourType: 6, bitDepth: 16, interlaced: true)
    let streamed = HostileFiles.zeroPNG(width: side, height: side, colourType: 6, bitDepth: 16, interlaced: false)
    let error = decodeError(interlaced, "interlaced.png", maxPixels: maxPixels)
    #expect(error?.code == .imageTooLarge, "\(String(describing: error))")
    #expect(error?.message.contains("interlaced") == true, "\(String(describing: error))")
    #expect(decodeError(streamed, "streamed.png", maxPixels: maxPixels) == nil)
    // 8-bit RGB interlaced is counted at 4.5 bytes a pixel, inside the 8 allowed here.
    let small = HostileFiles.zeroPNG(width: side, height: side, interlaced: true)
    #expect(decodeError(small, "small.png", maxPixels: maxPixels) == nil)
  }

  @Test("a progressive 4:4:4 JPEG counts libjpeg's coefficient buffer; baseline and 4:2:0 progressive do not exceed it")
  func progressiveJPEG() throws {
    let side = 200
    let maxPixels = side * side
    let full = Data(try TestImages.encoded(.jpeg(quality: 95, progressive: true), width: side, height: side).data)
    let frame = try #require(JPEGFrame(ImageBytes(full)))
    #expect(frame.buffersWholeImage && frame.sampling.allSatisfy { $0.horizontal == 1 && $0.vertical == 1 })
    let error = decodeError(full, "full.jpg", maxPixels: maxPixels)
    #expect(error?.code == .imageTooLarge, "\(String(describing: error))")
    #expect(error?.message.contains("progressive") == true, "\(String(describing: error))")
    let baseline = Data(try TestImages.encoded(.jpeg(quality: 95), width: side, height: side).data)
    #expect(JPEGFrame(ImageBytes(baseline))?.buffersWholeImage == false)
    #expect(decodeError(baseline, "baseline.jpg", maxPixels: maxPixels) == nil)
    let subsampled = Data(try TestImages.encoded(.jpeg(quality: 80, progressive: true), width: side, height: side).data)
    #expect(decodeError(subsampled, "subsampled.jpg", maxPixels: maxPixels) == nil)
  }

  @Test("metadata before the frame header cannot hide a progressive JPEG's coefficient buffer (17 segments of 64 KB)")
  func paddedProgressiveJPEG() throws {
    let side = 200
    var bytes = [UInt8](try TestImages.encoded(.jpeg(quality: 95, progressive: true), width: side, height: side).data)
    let segment: [UInt8] = [0xFF, 0xE9, 0xFF, 0xFF] + [UInt8](repeating: 0x41, count: 0xFFFF - 2)
    for _ in 0..<17 { bytes.insert(contentsOf: segment, at: 2) }
    let frame = try #require(JPEGFrame(ImageBytes(bytes)))
    #expect(frame.width == side && frame.buffersWholeImage)
    #expect(decodeError(Data(bytes), "padded.jpg", maxPixels: side * side)?.code == .imageTooLarge)
  }

  @Test("a JPEG side over libjpeg's 65,500 is imageTooLarge, not damage")
  func jpegSide() throws {
    var bytes = [UInt8](try TestImages.encoded(.jpeg(), width: 40, height: 30).data)
    let sof = try #require((2..<bytes.count - 9).first { bytes[$0] == 0xFF && bytes[$0 + 1] == 0xC0 })
    bytes[sof + 7] = 0xFF  // width 65,535 … 65,501 all fail alike in libjpeg
    bytes[sof + 8] = 0xDD
    let error = decodeError(Data(bytes), "wide.jpg")
    #expect(error?.code == .imageTooLarge, "\(String(describing: error))")
    #expect(error?.message.contains("65501×30") == true, "\(String(describing: error))")
  }

  @Test("an APNG's frame chunks are not metadata: 600 frames decode (the first), 5,000 are refused as frames")
  func apngFrames() {
    let side = 16
    let pixels = HostileFiles.deflate(Data(count: side * (1 + side * 3)))
    func apng(_ frames: Int) -> Data {
      let animation = HostileFiles.animationChunks(width: side, height: side, frames: frames, data: pixels)
      return HostileFiles.zeroPNG(
        width: side, height: side, interlaced: false, before: [animation.control, animation.frames[0]],
        after: Array(animation.frames.dropFirst()))
    }
    #expect(decodeError(apng(600), "600.png") == nil)
    let error = decodeError(apng(5_000), "5000.png")
    #expect(error?.code == .imageTooLarge, "\(String(describing: error))")
    #expect(error?.message.contains("frames") == true, "\(String(describing: error))")
  }
}

@Suite("Wrapping pixels checks the sizes before any arithmetic")
struct WrappingSizeTests {
  final class Owner {}

  @Test(
    "sizes whose product overflows, or beyond libvips' 32-bit sizes, are refused with a message",
    arguments: [(Int.max, 2, 3), (1 << 40, 1 << 40, 3), (Int(Int32.max) + 1, 1, 1), (4, 4, 5), (0, 4, 3), (4, -1, 3)])
  func refusesBadSizes(width: Int, height: Int, bands: Int) throws {
    let pixels = [UInt8](repeating: 7, count: 48)
    let error = pixels.withUnsafeBytes { bytes -> PipelineError? in
      do throws(PipelineError) {
        _ = try VipsImage.wrapping(bytes, width: width, height: height, bands: bands, owner: Owner())
        return nil
      } catch {
        return error
      }
    }
    #expect(error?.code == .invalidInput, "\(String(describing: error))")
    #expect(error?.message.contains("got 48") == true, "\(String(describing: error))")
  }

  @Test("pixels of the stated size are wrapped as they are")
  func wrapsMatchingSizes() throws {
    let pixels = (0..<48).map { UInt8($0) }
    let owner = Owner()
    let size = try pixels.withUnsafeBytes { bytes in
      let image = try VipsImage.wrapping(bytes, width: 4, height: 4, bands: 3, owner: owner)
      return (image.width, image.height, image.bands)
    }
    #expect(size == (4, 4, 3))
  }
}
