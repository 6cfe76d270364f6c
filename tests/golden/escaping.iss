; Inno Setup 6 script for My {App}'s 100% "Ünïcode", rendered by bundle 0.1.0 from bundle.lock.json
; (profile ort-1.19.2-gpu-cuda12). Do not edit: change the settings and run `bundle render iss` again.
; Source paths are relative to this script's folder, so the folder can be moved or compiled
; on another machine with Inno Setup 6.4 or newer (iscc SCRIPT).
#pragma inlinestart "<#"
#pragma inlineend "#>"

[Setup]
AppId={{C0961F89-C9FB-503B-B4A6-1FA3B3B7525C}
AppName=My {{App}'s 100% "Ünïcode"
AppVersion=1.0.0.0
VersionInfoVersion=1.0.0.0
AppPublisher=A & B {{C}
DefaultDirName={autopf}\My {{App}'s 100% _Ünïcode_
DefaultGroupName=My {{App}'s 100% _Ünïcode_
UninstallDisplayIcon={app}\my {{app} 'v2' 100% ü.exe
ArchitecturesAllowed=x64compatible
ArchitecturesInstallIn64BitMode=x64compatible
MinVersion=10.0.10240
PrivilegesRequired=admin
WizardStyle=modern
Compression=lzma2/normal
; compressed solid, in ISCC's separate (64-bit) compressor process
SolidCompression=yes
LZMAUseSeparateProcess=yes
LZMADictionarySize=16384
OutputBaseFilename=My-App-s-100-Ünïcode--1.0.0.0-setup
SetupLogging=yes
; the same bytes from the same inputs on any machine, in any time zone: each file's time in
; the setup is this date (UTC), not its source's (docs/reproducible.md)
TimeStampsInUTC=yes
TouchDate=1980-01-01
TouchTime=00:00:00

[Files]
Source: "bundle.lock.json"; DestDir: "{app}"; Flags: ignoreversion touch
Source: "licenses\ünïcödé (x64)\LICENSE [2] #1.txt"; DestDir: "{app}\licenses\ünïcödé (x64)"; Flags: ignoreversion touch
Source: "my {app} 'v2' 100% ü.exe"; DestDir: "{app}"; Flags: ignoreversion touch
Source: "vc_redist.x64.exe"; DestDir: "{tmp}"; Flags: ignoreversion deleteafterinstall touch; Check: VCRuntimeNeeded
Source: "{braces} & 'quotes' 100%.dll"; DestDir: "{app}"; Flags: ignoreversion touch

[UninstallDelete]
Type: files; Name: "{app}\bundle-installed.txt"

[Icons]
Name: "{autoprograms}\My {{App}'s 100% _Ünïcode_"; Filename: "{app}\my {{app} 'v2' 100% ü.exe"

[Run]
Filename: "{tmp}\vc_redist.x64.exe"; Parameters: "/install /quiet /norestart"; StatusMsg: "Installing the Microsoft Visual C++ runtime..."; Flags: waituntilterminated; Check: VCRuntimeNeeded

[Code]
const
  AppTitle = 'My {App}''s 100% "Ünïcode"';
  InstalledList = 'bundle-installed.txt';
  VCRuntimeKey = 'SOFTWARE\Microsoft\VisualStudio\14.0\VC\Runtimes\x64';
  VCRuntimeMajor = 14;
  VCRuntimeMinor = 40;
  DriverDll = 'nvcuda.dll';
  CudaMajor = 12;
  // NVIDIA driver 527.41: NVIDIA CUDA Toolkit Release Notes
  MinDriver = 52741;
  RequireGpuByDefault = False;

{ The installed VC++ runtime (x64), from the key vc_redist.x64.exe writes, in either registry
  view; True when it is missing or older than the bundle's binaries need. }
function InstalledVCRuntime(RootKey: Integer; var Major, Minor: Cardinal): Boolean;
var
  Installed: Cardinal;
begin
  Result := RegQueryDWordValue(RootKey, VCRuntimeKey, 'Installed', Installed) and (Installed = 1)
    and RegQueryDWordValue(RootKey, VCRuntimeKey, 'Major', Major)
    and RegQueryDWordValue(RootKey, VCRuntimeKey, 'Minor', Minor);
end;

function VCRuntimeNeeded: Boolean;
var
  Major, Minor: Cardinal;
begin
  if InstalledVCRuntime(HKLM64, Major, Minor) or InstalledVCRuntime(HKLM32, Major, Minor) then
  begin
    Result := (Major < VCRuntimeMajor) or ((Major = VCRuntimeMajor) and (Minor < VCRuntimeMinor));
    Log(Format('VC++ runtime: %d.%d installed, %d.%d needed', [Major, Minor, VCRuntimeMajor, VCRuntimeMinor]));
  end
  else
  begin
    Result := True;
    Log('VC++ runtime: not installed');
  end;
  if Result then
    Log('VC++ runtime: vc_redist.x64.exe will be run');
end;

// What this version installs into the app folder, one name a line (its lock's payload).
function NewPayload: TStringList;
begin
  Result := TStringList.Create;
  Result.Add('bundle.lock.json');
  Result.Add('licenses\ünïcödé (x64)\LICENSE [2] #1.txt');
  Result.Add('my {app} ''v2'' 100% ü.exe');
  Result.Add('{braces} & ''quotes'' 100%.dll');
end;

// Upgrades leave nothing stale: before the copy, every file that the previous version's
// installer listed in the app folder's InstalledList and this payload lacks is deleted (an
// old app-local vcruntime140.dll would shadow the newer system one; stale cuDNN sub-libraries
// of another version fail with SUBLIBRARY_VERSION_MISMATCH). Only listed names are touched,
// never a file the installer did not put there, and never a name that leaves the folder.
procedure RemoveStaleFiles;
var
  Old: TArrayOfString;
  Keep: TStringList;
  I: Integer;
  Name, Path, Folder: String;
begin
  if not LoadStringsFromFile(ExpandConstant('{app}\') + InstalledList, Old) then
    exit;
  Keep := NewPayload;
  try
    for I := 0 to GetArrayLength(Old) - 1 do
    begin
      Name := Trim(Old[I]);
      if (Name = '') or (Keep.IndexOf(Name) >= 0) or (Pos('..', Name) > 0) or (Pos(':', Name) > 0) or (Copy(Name, 1, 1) = '\') then
        continue;
      Path := ExpandConstant('{app}\') + Name;
      if FileExists(Path) then
      begin
        if DeleteFile(Path) then
          Log('upgrade: removed ' + Name + ' (installed by the previous version, not shipped by this one)')
        else
          Log('upgrade: could not remove ' + Name);
        // its folders, each only when empty, up to the app's folder (ep\webgpu, then ep)
        Folder := ExtractFileDir(Path);
        while (Length(Folder) > Length(ExpandConstant('{app}'))) and RemoveDir(Folder) do
          Folder := ExtractFileDir(Folder);
      end;
    end;
  finally
    Keep.Free;
  end;
end;

// UTF-8 (with a byte-order mark, which LoadStringsFromFile reads back), so names in any script
// survive until the next version's installer reads the list.
procedure SaveInstalledList;
var
  Names: TStringList;
  Lines: TArrayOfString;
  I: Integer;
begin
  Names := NewPayload;
  try
    SetArrayLength(Lines, Names.Count);
    for I := 0 to Names.Count - 1 do
      Lines[I] := Names[I];
  finally
    Names.Free;
  end;
  if not SaveStringsToUTF8File(ExpandConstant('{app}\') + InstalledList, Lines, False) then
    Log('upgrade: could not write the list of installed files');
end;

procedure CurStepChanged(CurStep: TSetupStep);
begin
  if CurStep = ssInstall then
    RemoveStaleFiles;
  if CurStep = ssPostInstall then
  begin
    SaveInstalledList;
  end;
end;

{ /REQUIREGPU on the command line (or the profile's require setting) makes a failed driver
  check stop the setup instead of only being reported. }
function GpuRequired: Boolean;
var
  I: Integer;
begin
  Result := RequireGpuByDefault;
  for I := 1 to ParamCount do
    if CompareText(ParamStr(I), '/REQUIREGPU') = 0 then
      Result := True;
end;

function DriverText(Version: Cardinal): String;
begin
  Result := Format('%d.%.2d', [Version div 100, Version mod 100]);
end;

{ The NVIDIA driver version from the FileVersion of its DLL in System32: 31.0.15.5161 is
  driver 551.61 (the last digit of the third part and the fourth part). An empty result means
  the driver is fine; otherwise it says what is wrong. }
function GpuDriverFinding: String;
var
  Path: String;
  VersionMS, VersionLS, Driver: Cardinal;
begin
  Result := '';
  Path := ExpandConstant('{sys}\') + DriverDll;
  if not FileExists(Path) then
  begin
    Result := Format('No NVIDIA driver found (%s is missing). %s needs an NVIDIA GPU with driver %s or newer for CUDA %d.', [Path, AppTitle, DriverText(MinDriver), CudaMajor]);
    exit;
  end;
  if not GetVersionNumbers(Path, VersionMS, VersionLS) then
  begin
    Result := Format('The NVIDIA driver version cannot be read from %s.', [Path]);
    exit;
  end;
  Driver := ((VersionLS shr 16) mod 10) * 10000 + (VersionLS and $FFFF);
  Log(Format('GPU preflight: NVIDIA driver %s found (%s), %s or newer needed for CUDA %d', [DriverText(Driver), Path, DriverText(MinDriver), CudaMajor]));
  if Driver < MinDriver then
    Result := Format('The NVIDIA driver %s is too old: %s needs %s or newer for CUDA %d.', [DriverText(Driver), AppTitle, DriverText(MinDriver), CudaMajor]);
end;

function InitializeSetup: Boolean;
var
  Finding: String;
begin
  Result := True;
  Finding := GpuDriverFinding;
  if Finding = '' then
  begin
    Log('GPU preflight: ok');
    exit;
  end;
  Log('GPU preflight: ' + Finding);
  if GpuRequired then
  begin
    Log('GPU preflight: a GPU is required (/REQUIREGPU): setup stops');
    if not WizardSilent then
      MsgBox(Finding + #13#10#13#10 + 'Setup cannot continue: this installation requires the GPU.', mbCriticalError, MB_OK);
    Result := False;
  end
  else if WizardSilent then
    Log('GPU preflight: installing anyway; the app will run on the CPU, or not at all')
  else
    Result := MsgBox(Finding + #13#10#13#10 + 'Without it the app will run on the CPU, or not at all. Install anyway?', mbConfirmation, MB_YESNO or MB_DEFBUTTON2) = IDYES;
end;
