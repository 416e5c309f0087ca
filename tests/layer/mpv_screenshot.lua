-- mpv_screenshot.lua: screenshot the first frame mpv shows, then quit.
-- Mode "window" has the VO (gpu-next: libplacebo) render the frame as it
-- would present it, scaled and converted, so the picture is the Vulkan
-- pipelines' output. The file name comes from
-- --script-opts=pcache_screenshot=NAME.
local done = false
mp.register_event("playback-restart", function()
  if done then
    return
  end
  done = true
  mp.commandv("screenshot-to-file", mp.get_opt("pcache_screenshot") or "shot.png", "window")
  mp.commandv("quit")
end)
