"""The third-party programs the layer is tested with, and how each is run.

Every command line here was chosen to run in seconds on lavapipe, headless
(a private Xvfb where a window is needed), and to give the same output,
byte for byte, every time it runs without the layer: docs/testing.md says
what each one exercises and what was tried and left out."""
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))


@dataclass
class Program:
    name: str
    # argv; '{lavapipe_name}' is replaced by the lavapipe device's name.
    argv: list
    # Executables that must be installed (else the test is skipped).
    needs: list
    x11: bool = False
    env: dict = field(default_factory=dict)
    # Files the program writes into its run directory, compared byte-wise.
    files: list = field(default_factory=list)
    # Output lines that are not the program's result (timings), dropped
    # before comparing stdout and stderr.
    drop: list = field(default_factory=list)
    # What every run's stdout+stderr must contain: proof that the program
    # did what it is here for (glmark2 names Zink as its renderer, not
    # llvmpipe's own GL, which would make no Vulkan pipeline).
    expect: list = field(default_factory=list)
    # Extra check of what is installed: returns None, or why to skip.
    probe: object = None
    # Whether the program creates pipelines (then run 1 must hash some).
    pipelines: bool = True
    # Validation VUIDs that timing alone decides (the program's own races):
    # printed, left out of the comparison.
    vvl_racy: list = field(default_factory=list)


# Zink over lavapipe. MESA_SHADER_CACHE_DISABLE keeps Zink's own disk cache
# out of the way (and with it Zink passes VK_NULL_HANDLE as the pipeline
# cache): every run compiles all its pipelines.
ZINK = {'LIBGL_ALWAYS_SOFTWARE': '1', 'GALLIUM_DRIVER': 'zink', 'MESA_SHADER_CACHE_DISABLE': 'true'}
ZINK_EXPECT = [r'GL_RENDERER:\s+zink ']

FFMPEG = ['ffmpeg', '-hide_banner', '-nostdin', '-loglevel', 'error',
          '-init_hw_device', 'vulkan=vk:0', '-filter_hw_device', 'vk',
          '-f', 'lavfi', '-i', 'testsrc2=size=320x240:rate=25']

# Every single-input *_vulkan filter of FFmpeg 5.1 and overlay_vulkan: 12
# compute pipelines.
FFMPEG_VULKAN_GRAPH = ('[0:v]format=yuv420p,hwupload,scale_vulkan=w=160:h=120,split[a][b];'
                       '[a]avgblur_vulkan,chromaber_vulkan,gblur_vulkan,transpose_vulkan,'
                       'hflip_vulkan,vflip_vulkan,flip_vulkan[m];'
                       '[b]scale_vulkan=w=64:h=48:scaler=nearest[o];'
                       '[m][o]overlay_vulkan=x=8:y=8,hwdownload,format=yuv420p')
FFMPEG_VULKAN_FILTERS = ['scale_vulkan', 'avgblur_vulkan', 'chromaber_vulkan', 'gblur_vulkan',
                         'transpose_vulkan', 'hflip_vulkan', 'vflip_vulkan', 'flip_vulkan',
                         'overlay_vulkan']

GST_ELEMENTS = ['vulkanupload', 'vulkancolorconvert', 'vulkanimageidentity', 'vulkanviewconvert',
                'vulkandownload', 'checksumsink', 'videotestsrc']


def _output(argv, env):
    try:
        r = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, str(e)
    return r.returncode, r.stdout + r.stderr


def _ffmpeg_filters(names):
    def probe(env):
        rc, out = _output(['ffmpeg', '-hide_banner', '-filters'], env)
        have = set(re.findall(r'^ \S+ (\S+)', out or '', re.M))
        missing = [n for n in names if n not in have]
        return f'ffmpeg lacks the filters {",".join(missing)}' if missing else None
    return probe


def _gst_elements(env):
    missing = [e for e in GST_ELEMENTS
               if _output(['gst-inspect-1.0', '--exists', e], env)[0] != 0]
    return f'GStreamer lacks the elements {",".join(missing)}' if missing else None


def _mpv_gpu_next(env):
    rc, out = _output(['mpv', '--no-config', '--gpu-context=help'], env)
    if 'x11vk' not in (out or ''):
        return 'mpv has no x11vk GPU context'
    rc, out = _output(['mpv', '--no-config', '--vo=help'], env)
    return None if 'gpu-next' in (out or '') else 'mpv has no gpu-next video output'


PROGRAMS = [
    Program('vkcube', ['vkcube', '--c', '100'], ['vkcube'], x11=True,
            expect=[r'Selected GPU 0: llvmpipe']),
    Program('glmark2', ['glmark2', '--validate'], ['glmark2'], x11=True, env=ZINK,
            expect=ZINK_EXPECT),
    # Without [terrain]: it alone takes longer under glmark2-es2 than the
    # whole desktop-GL run, and its shaders are glmark2's (same as above).
    Program('glmark2-es2', ['glmark2-es2', '--validate', '-f',
                            os.path.join(HERE, 'glmark2-es2.benchmarks')],
            ['glmark2-es2'], x11=True, env=ZINK, expect=ZINK_EXPECT),
    # libplacebo renders the first frame, upscaled and converted from
    # YUV; the script screenshots it through the VO (mode "window": rendered
    # by libplacebo) and quits.
    Program('mpv', ['mpv', '--no-config', '--quiet', '--osd-level=0', '--vo=gpu-next', '--gpu-api=vulkan',
                    '--gpu-context=x11vk', '--vulkan-device={lavapipe_name}',
                    '--gpu-shader-cache-dir=mpv-shader-cache', '--geometry=640x480',
                    '--scale=ewa_lanczos', '--pause',
                    '--script=' + os.path.join(HERE, 'mpv_screenshot.lua'),
                    '--script-opts=pcache_screenshot=shot.png',
                    'av://lavfi:testsrc2=size=320x240:rate=25,format=yuv420p'],
            ['mpv', 'vulkaninfo'], x11=True, files=['shot.png'], probe=_mpv_gpu_next,
            expect=[r"Screenshot: 'shot.png'"],
            # mpv quits with a present in flight now and then, and destroys
            # the swapchain's semaphore under it.
            vvl_racy=['VUID-vkDestroySemaphore-semaphore-01137']),
    Program('gstreamer', ['gst-launch-1.0', '-q', 'videotestsrc', 'num-buffers=10', 'pattern=smpte',
                          '!', 'video/x-raw,format=NV12,width=320,height=240,framerate=25/1',
                          '!', 'vulkanupload', '!', 'vulkancolorconvert',
                          '!', 'video/x-raw(memory:VulkanImage),format=BGRA',
                          '!', 'vulkanimageidentity', '!', 'vulkanviewconvert',
                          '!', 'vulkancolorconvert',
                          '!', 'video/x-raw(memory:VulkanImage),format=YUY2',
                          '!', 'vulkandownload', '!', 'video/x-raw,format=YUY2',
                          '!', 'checksumsink'],
            ['gst-launch-1.0', 'gst-inspect-1.0'], probe=_gst_elements,
            expect=[r'^0:00:00.360000000 [0-9a-f]{40}$']),
    Program('ffmpeg-vulkan', FFMPEG + ['-frames:v', '10', '-filter_complex', FFMPEG_VULKAN_GRAPH,
                                       '-f', 'framemd5', 'frames.md5'],
            ['ffmpeg'], files=['frames.md5'], probe=_ffmpeg_filters(FFMPEG_VULKAN_FILTERS)),
    Program('ffmpeg-libplacebo', FFMPEG + ['-frames:v', '5', '-vf',
                                           'format=yuv420p,hwupload,libplacebo=w=640:h=480:'
                                           'upscaler=ewa_lanczos:format=yuv420p,hwdownload,'
                                           'format=yuv420p',
                                           '-f', 'framemd5', 'frames.md5'],
            ['ffmpeg'], files=['frames.md5'], probe=_ffmpeg_filters(['libplacebo'])),
]


def find(name):
    for p in PROGRAMS:
        if p.name == name:
            return p
    return None


def missing_executables(program):
    return [n for n in program.needs if not shutil.which(n)]
