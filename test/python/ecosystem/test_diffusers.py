"""Hugging Face diffusers on neuron: denoising steps of tiny UNets and diffusion transformers
(built from configs, random weights, nothing downloaded) and whole pipelines give the same
results as the same models on the CPU, without CPU fallback. A CPU torch.Generator passed to a
pipeline draws the same noise for both devices (diffusers draws noise for neuron on the CPU)."""

import copy

import pytest
import torch

import torch_neuron

diffusers = pytest.importorskip("diffusers", reason="install with scripts/install.sh")


def on_neuron_like_cpu(cpu_model, run, rtol=0, atol=0):
    """run(model, device) on the model and on a copy of it on neuron; neuron's result must equal
    the CPU's (bit for bit by default: neuron runs the CPU's kernels) without any op falling
    back."""
    want = run(cpu_model, "cpu")
    neuron_model = copy.deepcopy(cpu_model).to("neuron")
    torch_neuron.clear_op_tracking()
    got = run(neuron_model, "neuron")
    assert torch_neuron.get_fallback_ops() == {}
    assert got.device.type == "neuron"
    torch.testing.assert_close(got.cpu(), want, rtol=rtol, atol=atol)


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def tiny_unet2d():
    torch.manual_seed(0)
    return diffusers.UNet2DModel(
        sample_size=16, in_channels=3, out_channels=3, block_out_channels=(16, 32),
        layers_per_block=1, norm_num_groups=8, attention_head_dim=8,
        down_block_types=("DownBlock2D", "AttnDownBlock2D"),
        up_block_types=("AttnUpBlock2D", "UpBlock2D"))


def test_unet_conditional_ddim_step_matches_cpu():
    torch.manual_seed(0)
    unet = diffusers.UNet2DConditionModel(
        sample_size=16, in_channels=4, out_channels=4, block_out_channels=(32, 64),
        layers_per_block=1, norm_num_groups=8, cross_attention_dim=32, attention_head_dim=8,
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D")).eval()
    latents, text = randn(2, 4, 16, 16, seed=1), randn(2, 7, 32, seed=2)
    scheduler = diffusers.DDIMScheduler()
    scheduler.set_timesteps(10)
    t = scheduler.timesteps[0]

    @torch.no_grad()
    def step(model, device):
        x = latents.to(device)
        noise_pred = model(x, t, encoder_hidden_states=text.to(device)).sample
        return scheduler.step(noise_pred, t, x).prev_sample

    on_neuron_like_cpu(unet, step)


def tiny_dit():
    torch.manual_seed(0)
    # num_embeds_ada_norm=1000: DiTPipeline uses class 1000 as the unconditional label.
    return diffusers.DiTTransformer2DModel(
        num_attention_heads=2, attention_head_dim=8, in_channels=4, out_channels=8,
        num_layers=2, sample_size=8, patch_size=2, num_embeds_ada_norm=1000,
        norm_num_groups=4).eval()


def tiny_sd3():
    torch.manual_seed(0)
    return diffusers.SD3Transformer2DModel(
        sample_size=8, patch_size=2, in_channels=4, out_channels=4, num_layers=2,
        attention_head_dim=8, num_attention_heads=2, joint_attention_dim=32,
        caption_projection_dim=16, pooled_projection_dim=16, pos_embed_max_size=16).eval()


def tiny_pixart():
    torch.manual_seed(0)
    return diffusers.PixArtTransformer2DModel(
        num_attention_heads=2, attention_head_dim=8, in_channels=4, out_channels=8,
        num_layers=2, cross_attention_dim=16, caption_channels=32, sample_size=8,
        patch_size=2, norm_num_groups=4).eval()


@pytest.mark.parametrize("name", ["dit", "sd3", "pixart"])
def test_transformer_denoising_step_matches_cpu(name):
    latents, text, pooled = randn(2, 4, 8, 8, seed=1), randn(2, 5, 32, seed=2), randn(2, 16, seed=3)
    if name == "sd3":  # rectified flow: the model predicts a velocity
        model, scheduler = tiny_sd3(), diffusers.FlowMatchEulerDiscreteScheduler()
    else:  # DiT and PixArt predict the noise and a learned variance (8 = 2 x 4 channels)
        model = tiny_dit() if name == "dit" else tiny_pixart()
        scheduler = diffusers.DDIMScheduler()
    scheduler.set_timesteps(10)
    t = scheduler.timesteps[0]

    @torch.no_grad()
    def step(model, device):
        x, timestep = latents.to(device), t.expand(2).to(device)
        if name == "dit":
            out = model(x, timestep=timestep, class_labels=torch.tensor([1, 7], device=device))
        elif name == "sd3":
            out = model(hidden_states=x, timestep=timestep, encoder_hidden_states=text.to(device),
                        pooled_projections=pooled.to(device))
        else:
            out = model(x, timestep=timestep, encoder_hidden_states=text.to(device),
                        added_cond_kwargs={"resolution": None, "aspect_ratio": None})
        prediction = out.sample[:, :4]
        return scheduler.step(prediction, t, x).prev_sample

    on_neuron_like_cpu(model, step)


def test_ddpm_pipeline_matches_cpu():
    def generate(unet, device):
        pipe = diffusers.DDPMPipeline(unet=unet, scheduler=diffusers.DDPMScheduler())
        pipe.set_progress_bar_config(disable=True)
        assert pipe.device.type == device
        images = pipe(batch_size=2, num_inference_steps=2, output_type="np",
                      generator=torch.Generator().manual_seed(0)).images
        return torch.from_numpy(images).to(device)  # numpy is host memory; compare as tensors

    on_neuron_like_cpu(tiny_unet2d().eval(), generate)


def test_dit_latent_pipeline_with_guidance_matches_cpu():
    # Latent diffusion with classifier-free guidance: a DiT denoises, a tiny VAE decodes.
    torch.manual_seed(0)
    vae = diffusers.AutoencoderKL(
        in_channels=3, out_channels=3, block_out_channels=(8, 16), latent_channels=4,
        layers_per_block=1, norm_num_groups=4, sample_size=8,
        down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
        up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D")).eval()
    models = torch.nn.ModuleDict({"transformer": tiny_dit(), "vae": vae})

    def generate(models, device):
        pipe = diffusers.DiTPipeline(transformer=models["transformer"], vae=models["vae"],
                                     scheduler=diffusers.DDIMScheduler())
        pipe.set_progress_bar_config(disable=True)
        return pipe(class_labels=[1, 7], num_inference_steps=2, guidance_scale=4.0,
                    output_type="pt", generator=torch.Generator().manual_seed(0)).images

    on_neuron_like_cpu(models, generate)


def test_unet_training_step_matches_cpu():
    images, noise = randn(2, 3, 16, 16, seed=1).tanh(), randn(2, 3, 16, 16, seed=2)
    timesteps = torch.tensor([10, 900])
    scheduler = diffusers.DDPMScheduler()

    def train_step(model, device):
        noisy = scheduler.add_noise(images.to(device), noise.to(device), timesteps.to(device))
        loss = torch.nn.functional.mse_loss(model(noisy, timesteps.to(device)).sample,
                                            noise.to(device))
        loss.backward()
        return torch.cat([loss.detach().reshape(1)] + [p.grad.flatten() for p in model.parameters()])

    # Not bit for bit: autograd's native_group_norm formula keeps a channels-last input's memory
    # format for the backward only on the CPU and makes it contiguous elsewhere, so neuron runs
    # the CPU's contiguous group-norm backward where the CPU runs its channels-last one (diffusers'
    # attention blocks return channels-last views); the summation orders differ.
    on_neuron_like_cpu(tiny_unet2d().train(), train_step, rtol=1e-4, atol=1e-5)
