@echo off
rem Post-build step of a bundle, rendered by bundle 0.1.0 from bundle.lock.json.
rem Do not edit: run "bundle render postbuild" again.
setlocal EnableExtensions DisableDelayedExpansion
rem Some names below are not ASCII. This file is UTF-8 without a byte-order mark (cmd would
rem read a BOM as part of the first command). cmd decodes each line in the console's code
rem page when it reaches it, so after chcp 65001 it reads the rest as UTF-8; the caller's
rem code page is put back at the end.
for /f "tokens=2 delims=:." %%c in ('chcp') do set "CALLER_CP=%%c"
chcp 65001 >nul 2>&1
rem
rem   postbuild.cmd TARGET_DIR [/LICENSES]
rem
rem copies the 6 DLLs of the bundle of "my ^app & (x) 100%%.exe" (profile "ort-1.19.2-cpu")
rem from this script's folder into TARGET_DIR, e.g. a Visual Studio project's $(OutDir) (see
rem postbuild.event.xml); with /LICENSES also its 2 licence files.
rem Exit code 0: every file is in TARGET_DIR (also when none was newer); 2: wrong command
rem line; else the first failure's, with a line on stderr: 4 a file of the bundle is missing
rem or TARGET_DIR is not a usable path, 5 a file could not be written (xcopy's codes).
rem
rem xcopy /Y overwrites without asking; /I and the \ ending each destination make it a folder
rem (created when missing) instead of asking "file or directory?"; /D copies a file only when
rem it is newer than the one in TARGET_DIR, so a rebuild copies nothing; /R replaces a copy
rem that was made read-only (by source control, or copied with its attribute) instead of
rem failing on it. No /Q and no >nul: xcopy names what it copies and says why a copy failed.
rem Each file is named on its own lines, so the script copies exactly the lock's files; a
rem name never passes through a variable, whose %% signs Wine's cmd would expand again.
set "SOURCE=%~dp0"
set "TARGET=%~1"
set "SWITCH=%~2"
set "LICENSES="
set "RC=0"
if not defined TARGET goto usage
if "%TARGET:~0,1%"=="/" goto usage
if /i "%SWITCH%"=="/LICENSES" set "LICENSES=1"
if defined SWITCH if not defined LICENSES goto usage
if not "%~3"=="" goto usage
rem "$(OutDir)" passes a folder with its trailing backslash (...\"): drop it, the destinations
rem below add their own.
if "%TARGET:~-1%"=="\" set "TARGET=%TARGET:~0,-1%"
if not exist "%SOURCE%%%PATH%%x.dll" (set "RC=4" & >&2 echo postbuild: error: "%SOURCE%%%PATH%%x.dll" is missing; run bundle build again & goto end)
xcopy /Y /I /D /R "%SOURCE%%%PATH%%x.dll" "%TARGET%\"
if errorlevel 2 (set "RC=%ERRORLEVEL%" & >&2 echo postbuild: error: cannot copy "%%PATH%%x.dll" into "%TARGET%\", xcopy exit code %ERRORLEVEL% & goto end)
if not exist "%SOURCE%%%~dp0 %%1.dll" (set "RC=4" & >&2 echo postbuild: error: "%SOURCE%%%~dp0 %%1.dll" is missing; run bundle build again & goto end)
xcopy /Y /I /D /R "%SOURCE%%%~dp0 %%1.dll" "%TARGET%\"
if errorlevel 2 (set "RC=%ERRORLEVEL%" & >&2 echo postbuild: error: cannot copy "%%~dp0 %%1.dll" into "%TARGET%\", xcopy exit code %ERRORLEVEL% & goto end)
if not exist "%SOURCE%100%% (x86) & co.dll" (set "RC=4" & >&2 echo postbuild: error: "%SOURCE%100%% (x86) & co.dll" is missing; run bundle build again & goto end)
xcopy /Y /I /D /R "%SOURCE%100%% (x86) & co.dll" "%TARGET%\"
if errorlevel 2 (set "RC=%ERRORLEVEL%" & >&2 echo postbuild: error: cannot copy "100%% (x86) & co.dll" into "%TARGET%\", xcopy exit code %ERRORLEVEL% & goto end)
if not exist "%SOURCE%a^b;c.dll" (set "RC=4" & >&2 echo postbuild: error: "%SOURCE%a^b;c.dll" is missing; run bundle build again & goto end)
xcopy /Y /I /D /R "%SOURCE%a^b;c.dll" "%TARGET%\"
if errorlevel 2 (set "RC=%ERRORLEVEL%" & >&2 echo postbuild: error: cannot copy "a^b;c.dll" into "%TARGET%\", xcopy exit code %ERRORLEVEL% & goto end)
if not exist "%SOURCE%it's ünï!,=[~1].dll" (set "RC=4" & >&2 echo postbuild: error: "%SOURCE%it's ünï!,=[~1].dll" is missing; run bundle build again & goto end)
xcopy /Y /I /D /R "%SOURCE%it's ünï!,=[~1].dll" "%TARGET%\"
if errorlevel 2 (set "RC=%ERRORLEVEL%" & >&2 echo postbuild: error: cannot copy "it's ünï!,=[~1].dll" into "%TARGET%\", xcopy exit code %ERRORLEVEL% & goto end)
if not exist "%SOURCE%onnxruntime.dll" (set "RC=4" & >&2 echo postbuild: error: "%SOURCE%onnxruntime.dll" is missing; run bundle build again & goto end)
xcopy /Y /I /D /R "%SOURCE%onnxruntime.dll" "%TARGET%\"
if errorlevel 2 (set "RC=%ERRORLEVEL%" & >&2 echo postbuild: error: cannot copy "onnxruntime.dll" into "%TARGET%\", xcopy exit code %ERRORLEVEL% & goto end)
if defined LICENSES goto licenses
echo postbuild: the 6 DLLs of my ^^app ^& ^(x^) 100%%.exe are up to date in "%TARGET%"
goto end
:licenses
if not exist "%SOURCE%licenses\onnxruntime\ThirdPartyNotices.txt" (set "RC=4" & >&2 echo postbuild: error: "%SOURCE%licenses\onnxruntime\ThirdPartyNotices.txt" is missing; run bundle build again & goto end)
xcopy /Y /I /D /R "%SOURCE%licenses\onnxruntime\ThirdPartyNotices.txt" "%TARGET%\licenses\onnxruntime\"
if errorlevel 2 (set "RC=%ERRORLEVEL%" & >&2 echo postbuild: error: cannot copy "licenses\onnxruntime\ThirdPartyNotices.txt" into "%TARGET%\licenses\onnxruntime\", xcopy exit code %ERRORLEVEL% & goto end)
if not exist "%SOURCE%licenses\ünï (x64) & co\LICENSE 100%%.txt" (set "RC=4" & >&2 echo postbuild: error: "%SOURCE%licenses\ünï (x64) & co\LICENSE 100%%.txt" is missing; run bundle build again & goto end)
xcopy /Y /I /D /R "%SOURCE%licenses\ünï (x64) & co\LICENSE 100%%.txt" "%TARGET%\licenses\ünï (x64) & co\"
if errorlevel 2 (set "RC=%ERRORLEVEL%" & >&2 echo postbuild: error: cannot copy "licenses\ünï (x64) & co\LICENSE 100%%.txt" into "%TARGET%\licenses\ünï (x64) & co\", xcopy exit code %ERRORLEVEL% & goto end)
echo postbuild: the 6 DLLs and 2 licence files of my ^^app ^& ^(x^) 100%%.exe are up to date in "%TARGET%"
goto end

:usage
>&2 echo usage: postbuild.cmd TARGET_DIR [/LICENSES]
>&2 echo copies the 6 DLLs of my ^^app ^& ^(x^) 100%%.exe ^(with /LICENSES also their licence files^) into TARGET_DIR
set "RC=2"

:end
chcp %CALLER_CP% >nul 2>&1
exit /b %RC%
